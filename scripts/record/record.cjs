// vodlab record's browser side (run by `vodlab record`, which embeds this file;
// see docs/record.md). Drives the system Chromium with puppeteer-core, plays
// a manifest with dash.js (an MPD) or hls.js (a multivariant playlist),
// through Chromium's own network emulation when asked (else the link is
// whatever the host or network namespace has), and writes every request the
// page made (from DevTools Network events) and the player's metrics as JSON.
//
// usage: NODE_PATH=<dir>/node_modules node record.cjs CONFIG.json
// CONFIG: { chromium, origin, manifest, player: "dash"|"hls", player_js,
//           settings (dash.js updateSettings object / hls.js config, or null),
//           cmcd (null, or { mode: "query"|"header", sid, cid }: dash.js's own
//           CMCD turned on), seconds, down_kbps, up_kbps, latency_ms,
//           quic (null, or { origin: "HOST:PORT", spki: pin }: HTTP/3 forced
//           for that origin, its certificate trusted by the pin), out, no_sandbox }
'use strict';
const fs = require('fs');
const puppeteer = require('puppeteer-core');

const PREFIX = '/__vodlab_record/';

// Shared by both pages: the metrics object, stalls from the video element,
// a buffer sample every 250 ms (`sample()` gives the player-specific part).
const COMMON = `
const m = { switches: [], stalls: [], buffer: [], errors: [], events: [], started_s: null,
            levels: { video: [], audio: [] } };
window.__vodlab = m;
const now = () => performance.now() / 1000;
const v = document.getElementById('v');
let stall = null;
v.addEventListener('playing', () => {
  if (m.started_s === null) m.started_s = now();
  if (stall) { stall.end_s = now(); m.stalls.push(stall); stall = null; }
});
v.addEventListener('waiting', () => {
  if (m.started_s !== null && !stall && !v.ended) stall = { start_s: now(), end_s: null, at_media_s: v.currentTime };
});
function ahead() {
  const b = v.buffered, t = v.currentTime;
  for (let i = 0; i < b.length; i++) if (b.start(i) <= t + 0.1 && t < b.end(i)) return b.end(i) - t;
  return 0;
}
window.__vodlab_finish = () => { if (stall) { m.stalls.push(stall); stall = null; } return m; };
`;

function page(body) {
  return `<!doctype html><html><head><meta charset="utf-8"><title>vodlab record</title></head>
<body><video id="v" muted autoplay playsinline width="640" height="360"></video>
${body}</body></html>`;
}

function dash_page(mpd, settings, cmcd) {
  return page(`<script src="${PREFIX}player.js"></script>
<script>
${COMMON}
const p = dashjs.MediaPlayer().create();
p.updateSettings({ debug: { logLevel: dashjs.Debug.LOG_LEVEL_WARNING } });
const cmcd = ${JSON.stringify(cmcd || null)};
// dash.js's own CMCD (its streaming.cmcd); --player-settings may override
if (cmcd) p.updateSettings({ streaming: { cmcd: { enabled: true, mode: cmcd.mode, sid: cmcd.sid, cid: cmcd.cid } } });
const settings = ${JSON.stringify(settings || null)};
if (settings) p.updateSettings(settings);
m.settings = p.getSettings().streaming;
m.player = 'dash.js ' + p.getVersion();
const E = dashjs.MediaPlayer.events;
p.on(E.STREAM_INITIALIZED, () => {
  for (const t of ['video', 'audio']) {
    try { m.levels[t] = p.getBitrateInfoListFor(t).map(b => ({ index: b.qualityIndex, bitrate: b.bitrate, width: b.width, height: b.height })); } catch (e) {}
  }
  m.events.push({ t: now(), e: 'stream_initialized' });
});
p.on(E.QUALITY_CHANGE_RENDERED, e => {
  const list = m.levels[e.mediaType] || [];
  m.switches.push({ t: now(), media: e.mediaType, from: e.oldQuality, to: e.newQuality,
                    bitrate: list[e.newQuality] ? list[e.newQuality].bitrate : null });
});
p.on(E.PLAYBACK_STARTED, () => m.events.push({ t: now(), e: 'playback_started' }));
p.on(E.ERROR, e => m.errors.push({ t: now(), error: JSON.stringify(e.error || e) }));
p.on(E.PLAYBACK_ERROR, e => m.errors.push({ t: now(), error: 'playback: ' + JSON.stringify(e.error || '') }));
setInterval(() => {
  let bv = null, ba = null, q = null, tp = null;
  try { bv = p.getDashMetrics().getCurrentBufferLevel('video'); } catch (e) {}
  try { ba = p.getDashMetrics().getCurrentBufferLevel('audio'); } catch (e) {}
  try { q = p.getQualityFor('video'); } catch (e) {}
  try { tp = p.getAverageThroughput('video'); } catch (e) {}
  m.buffer.push({ t: now(), video_s: bv, audio_s: ba, quality: q, position_s: v.currentTime,
                  throughput_kbps: Number.isFinite(tp) ? tp : null });
}, 250);
m.t0_s = now(); m.t0_wall_s = Date.now() / 1000;
p.initialize(v, ${JSON.stringify(mpd)}, true);
</script>`);
}

function hls_page(url, settings) {
  return page(`<script src="${PREFIX}player.js"></script>
<script>
${COMMON}
const h = new Hls(Object.assign({ debug: false }, ${JSON.stringify(settings || {})}));
m.settings = {};
for (const k of ['abrEwmaFastVoD', 'abrEwmaSlowVoD', 'abrEwmaDefaultEstimate', 'abrBandWidthFactor',
                 'abrBandWidthUpFactor', 'maxBufferLength', 'maxMaxBufferLength', 'maxBufferSize',
                 'startLevel', 'capLevelToPlayerSize', 'maxStarvationDelay', 'maxLoadingDelay'])
  m.settings[k] = h.config[k];
m.player = 'hls.js ' + Hls.version;
let level = null;
h.on(Hls.Events.MANIFEST_PARSED, () => {
  m.levels.video = h.levels.map((l, i) => ({ index: i, bitrate: l.bitrate, width: l.width, height: l.height }));
  m.events.push({ t: now(), e: 'manifest_parsed' });
  v.play().catch(e => m.errors.push({ t: now(), error: 'play: ' + e, fatal: false }));
});
h.on(Hls.Events.LEVEL_SWITCHED, (_, d) => {
  const l = m.levels.video[d.level];
  m.switches.push({ t: now(), media: 'video', from: level, to: d.level, bitrate: l ? l.bitrate : null });
  level = d.level;
});
h.on(Hls.Events.ERROR, (_, d) => {
  if (m.errors.length < 100) m.errors.push({ t: now(), error: d.type + ': ' + d.details, fatal: !!d.fatal });
});
setInterval(() => {
  const tp = h.bandwidthEstimate;
  m.buffer.push({ t: now(), video_s: ahead(), audio_s: null, quality: h.currentLevel,
                  position_s: v.currentTime, throughput_kbps: Number.isFinite(tp) ? tp / 1000 : null });
}, 250);
m.t0_s = now(); m.t0_wall_s = Date.now() / 1000;
h.loadSource(${JSON.stringify(url)});
h.attachMedia(v);
</script>`);
}

async function main() {
  const cfg = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  const player_js = fs.readFileSync(cfg.player_js);
  // dash.js gets the MPD's absolute URL: its CMCD query mode adds the
  // parameter with `new URL(url)`, which leaves a relative URL as it is
  const html = cfg.player === 'hls' ? hls_page(cfg.manifest, cfg.settings) : dash_page(new URL(cfg.manifest, cfg.origin).href, cfg.settings, cfg.cmcd);
  const args = ['--autoplay-policy=no-user-gesture-required', '--mute-audio', '--disable-gpu',
    '--disable-dev-shm-usage', '--no-first-run', '--no-default-browser-check',
    '--disable-background-networking', '--disable-component-update'];
  if (cfg.no_sandbox) args.push('--no-sandbox');
  // HTTP/3: QUIC for the server's origin from the first request (no Alt-Svc
  // round), its certificate (a CA of the run's own) trusted by its key's pin
  if (cfg.quic) args.push('--enable-quic', '--origin-to-force-quic-on=' + cfg.quic.origin,
    '--ignore-certificate-errors-spki-list=' + cfg.quic.spki);
  // the page comes from DevTools interception (no address space of its own):
  // a private server (a `vodlab lab` host, 10.77.0.1) would be refused by
  // Chromium's private/local network access checks ("the request client is
  // not a secure context and the resource is in more-private address
  // space"); the server's address is declared public, nothing else changes
  const host = new URL(cfg.origin).host;
  if (!/^(127\.|localhost|\[::1\])/.test(host)) args.push('--ip-address-space-overrides=' + host + '=public');
  const browser = await puppeteer.launch({ executablePath: cfg.chromium, headless: true, args,
    protocolTimeout: (cfg.seconds + 60) * 1000 });
  const out = { chromium: await browser.version(), requests: [], metrics: null, console: [] };
  try {
    const page = await browser.newPage();
    page.on('console', msg => { if (out.console.length < 200) out.console.push(msg.type() + ': ' + msg.text()); });
    page.on('pageerror', err => out.console.push('pageerror: ' + err.message));
    const cdp = await page.createCDPSession();
    const reqs = new Map();
    // the CMCD-* headers the player set (XHR setRequestHeader), as sent
    const cmcd_of = h => Object.entries(h || {}).filter(([k, v]) => /^cmcd-/i.test(k) && v !== '')
      .map(([k, v]) => k + ': ' + v);
    cdp.on('Network.requestWillBeSent', e => {
      if (!e.request.url.startsWith(cfg.origin) || e.request.url.includes(PREFIX)) return;
      // the player's own requests (XHR/fetch): not the browser's favicon
      if (e.type && e.type !== 'XHR' && e.type !== 'Fetch') return;
      const h = e.request.headers || {};
      const range = h.Range || h.range || null;
      reqs.set(e.requestId, { url: e.request.url, method: e.request.method, range,
        t_s: e.timestamp, wall_s: e.wallTime, type: e.type || null,
        status: null, bytes: null, body_bytes: null, end_s: null, failed: null, protocol: null,
        cmcd_headers: cmcd_of(h) });
    });
    cdp.on('Network.requestWillBeSentExtraInfo', e => {
      const r = reqs.get(e.requestId);
      const h = e.headers || {};
      if (r && !r.range) r.range = h.Range || h.range || null;
      if (r && r.cmcd_headers.length === 0) r.cmcd_headers = cmcd_of(h);
    });
    cdp.on('Network.responseReceived', e => {
      const r = reqs.get(e.requestId);
      if (r) { r.status = e.response.status; r.response_s = e.timestamp; r.protocol = e.response.protocol || null; }
    });
    cdp.on('Network.dataReceived', e => {
      const r = reqs.get(e.requestId);
      if (r) r.body_bytes = (r.body_bytes || 0) + e.dataLength;
    });
    cdp.on('Network.loadingFinished', e => {
      const r = reqs.get(e.requestId);
      if (r) { r.end_s = e.timestamp; r.bytes = e.encodedDataLength; }
    });
    cdp.on('Network.loadingFailed', e => {
      const r = reqs.get(e.requestId);
      if (r) { r.end_s = e.timestamp; r.failed = e.errorText + (e.canceled ? ' (canceled)' : ''); }
    });
    await cdp.send('Network.enable');
    await cdp.send('Network.setCacheDisabled', { cacheDisabled: true });
    // the page and the player come from this script (Fetch interception of
    // PREFIX only); every other request goes to the server as it is
    await cdp.send('Fetch.enable', { patterns: [{ urlPattern: '*' + PREFIX + '*', requestStage: 'Request' }] });
    cdp.on('Fetch.requestPaused', async e => {
      const path = new URL(e.request.url).pathname;
      let body, type;
      if (path.endsWith('player.js')) { body = player_js; type = 'application/javascript'; }
      else { body = Buffer.from(html); type = 'text/html; charset=utf-8'; }
      await cdp.send('Fetch.fulfillRequest', { requestId: e.requestId, responseCode: 200,
        responseHeaders: [{ name: 'Content-Type', value: type }, { name: 'Cache-Control', value: 'no-store' }],
        body: body.toString('base64') });
    });
    if (cfg.down_kbps > 0 || cfg.latency_ms > 0) {
      // Chromium's own emulation: per request, in the network service, not TCP
      await cdp.send('Network.emulateNetworkConditions', {
        offline: false, latency: cfg.latency_ms,
        downloadThroughput: cfg.down_kbps > 0 ? cfg.down_kbps * 1000 / 8 : -1,
        uploadThroughput: cfg.up_kbps > 0 ? cfg.up_kbps * 1000 / 8 : -1 });
    }
    const t_nav = Date.now();
    await page.goto(cfg.origin + PREFIX + 'index.html', { waitUntil: 'load' });
    const left = cfg.seconds * 1000 - (Date.now() - t_nav);
    if (left > 0) await new Promise(r => setTimeout(r, left));
    out.metrics = await page.evaluate(() => window.__vodlab_finish());
    out.requests = [...reqs.values()].sort((a, b) => a.t_s - b.t_s);
  } finally {
    await browser.close();
  }
  fs.writeFileSync(cfg.out, JSON.stringify(out, null, 1));
}

main().catch(e => { console.error('record: ' + (e && e.stack || e)); process.exit(1); });
