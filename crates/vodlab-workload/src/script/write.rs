//! Writers: vodlab's own format (lossless) and exports to httperf,
//! CloudSuite videosesslog and h2load timing scripts (lossy, with a report of
//! what was dropped or approximated).

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

use super::{Method, Request, Script, Session, Wait};

/// What an export kept, dropped and approximated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportReport {
    /// Sessions read.
    pub sessions_in: usize,
    /// Sessions written.
    pub sessions_out: usize,
    /// Requests written.
    pub requests_out: usize,
    /// Loss or approximation (a sentence) to the number of times it happened.
    pub notes: BTreeMap<&'static str, usize>,
}

impl ExportReport {
    fn note(&mut self, what: &'static str) {
        *self.notes.entry(what).or_default() += 1;
    }

    /// True when the export is exact.
    pub fn is_lossless(&self) -> bool {
        self.notes.is_empty()
    }
}

impl fmt::Display for ExportReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "exported {} of {} sessions, {} requests",
            self.sessions_out, self.sessions_in, self.requests_out
        )?;
        for (what, n) in &self.notes {
            write!(f, "\n  {n} x {what}")?;
        }
        Ok(())
    }
}

/// Writes a whole script in vodlab's format.
pub fn write_vodlab(script: &Script) -> String {
    let mut out = String::new();
    for (i, s) in script.sessions.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        write_vodlab_session(s, &mut out);
    }
    out
}

/// Appends one session in vodlab's format (no trailing blank line).
pub fn write_vodlab_session(s: &Session, out: &mut String) {
    let h = &s.header;
    if *h != Default::default() {
        out.push_str("#@session");
        if let Some(v) = h.id {
            let _ = write!(out, " id={v}");
        }
        if let Some(v) = &h.class {
            let _ = write!(out, " class={v}");
        }
        if let Some(v) = &h.title {
            let _ = write!(out, " title={v}");
        }
        if let Some(v) = h.rank {
            let _ = write!(out, " rank={v}");
        }
        if let Some(v) = &h.rep {
            let _ = write!(out, " rep={v}");
        }
        if let Some(v) = h.bitrate_bps {
            let _ = write!(out, " bitrate={v}");
        }
        if let Some(v) = h.request_s {
            let _ = write!(out, " request_s={v}");
        }
        push_server(out, s);
        out.push('\n');
    }
    for (i, r) in s.requests.iter().enumerate() {
        if r.burst {
            out.push_str("    ");
        }
        out.push_str(&r.path);
        if let Some(range) = r.range {
            let _ = write!(out, " range={}-", range.start);
            if let Some(e) = range.end {
                let _ = write!(out, "{e}");
            }
        }
        if r.method != Method::Get {
            let _ = write!(out, " method={}", r.method.as_str());
        }
        if let Some(t) = r.timeout_s {
            let _ = write!(out, " timeout={t}");
        }
        if let (Wait::Pacing(p), false) = (r.wait, r.burst) {
            let _ = write!(out, " pacing={p}");
        }
        if !r.burst {
            if let Some(Wait::Think(t)) = next_head(&s.requests, i).map(|r| r.wait) {
                let _ = write!(out, " think={t}");
            }
        }
        if r.conn != 0 {
            let _ = write!(out, " conn={}", r.conn);
        }
        if let Some(size) = r.size {
            let _ = write!(out, " size={size}");
        }
        if let Some(n) = r.stop_after {
            let _ = write!(out, " stop_after={n}");
        }
        if let Some(k) = r.read_kbps {
            let _ = write!(out, " read_kbps={k}");
        }
        if r.detach {
            out.push_str(" detach=1");
        }
        if r.http10 {
            out.push_str(" http=1.0");
        }
        if !r.headers.is_empty() {
            let _ = write!(out, " headers={}", quote(&r.headers.join("\r\n")));
        }
        if let Some(b) = &r.body {
            let _ = write!(out, " contents={}", quote(b));
        }
        out.push('\n');
    }
}

fn push_server(out: &mut String, s: &Session) {
    let h = &s.header;
    if let Some(v) = &h.server {
        let _ = write!(out, " server={v}");
    }
    if let Some(v) = h.port {
        let _ = write!(out, " port={v}");
    }
    if let Some(v) = h.ssl {
        let _ = write!(out, " ssl={}", if v { "on" } else { "off" });
    }
}

/// The first request of the burst after the one containing request `i`.
fn next_head(reqs: &[Request], i: usize) -> Option<&Request> {
    reqs[i + 1..].iter().find(|r| !r.burst)
}

/// Double-quotes a value with backslash escapes the reader understands.
fn quote(v: &str) -> String {
    let mut q = String::from("\"");
    for ch in v.chars() {
        match ch {
            '\\' => q.push_str("\\\\"),
            '"' => q.push_str("\\\""),
            '\n' => q.push_str("\\n"),
            '\r' => q.push_str("\\r"),
            '\t' => q.push_str("\\t"),
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

fn absolute(path: &str) -> String {
    if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{path}")
    }
}

/// Exports to the wsesslog syntax of stock httperf (0.9): bursts, `think=`,
/// `method=`, `contents=`. httperf cannot send a Range or other header, so
/// sessions with range requests or headers are left out; per-request
/// timeouts become httperf's single `--timeout`; pacing becomes think time
/// (httperf counts it from the end of the previous response, so a session
/// runs longer by its response times).
pub fn export_httperf(script: &Script) -> (String, ExportReport) {
    let mut rep = ExportReport {
        sessions_in: script.sessions.len(),
        ..Default::default()
    };
    let mut out = String::new();
    for s in &script.sessions {
        if s.requests.iter().any(|r| r.range.is_some()) {
            rep.note(
                "session left out: range requests (httperf's wsesslog cannot send a Range header)",
            );
            continue;
        }
        if s.requests.iter().any(|r| !r.headers.is_empty()) {
            rep.note("session left out: request headers (httperf's wsesslog cannot send them)");
            continue;
        }
        if s.header.server.is_some() || s.header.port.is_some() || s.header.ssl.is_some() {
            rep.note("per-session server/port/ssl dropped (httperf uses --server/--port)");
        }
        if rep.sessions_out > 0 {
            out.push('\n');
        }
        rep.sessions_out += 1;
        for (i, r) in s.requests.iter().enumerate() {
            if r.burst {
                out.push_str("    ");
            }
            out.push_str(&absolute(&r.path));
            if r.method != Method::Get {
                let _ = write!(out, " method={}", r.method.as_str());
            }
            if let Some(b) = &r.body {
                let _ = write!(out, " contents={}", quote(b));
            }
            if !r.burst {
                match next_head(&s.requests, i).map(|r| r.wait) {
                    Some(Wait::Think(t)) => {
                        let _ = write!(out, " think={t}");
                    }
                    Some(Wait::Pacing(p)) => {
                        rep.note("pacing converted to think time (counted from the end of the previous response)");
                        let _ = write!(out, " think={p}");
                    }
                    _ => {}
                }
            }
            if r.timeout_s.is_some() {
                rep.note("per-request timeout dropped (use httperf --timeout)");
            }
            if r.conn != 0 {
                rep.note("connection index dropped (httperf uses --max-connections)");
            }
            if r.size.is_some() {
                rep.note("expected size dropped");
            }
            if r.stop_after.is_some() {
                rep.note("stop_after dropped (httperf reads every response to its end)");
            }
            if r.read_kbps.is_some() {
                rep.note("read_kbps dropped (httperf reads as fast as it can)");
            }
            if r.detach {
                rep.note("detach dropped (httperf waits for every response of a burst)");
            }
            if r.http10 {
                rep.note("http=1.0 dropped (use httperf --http-version)");
            }
            if i == 0 && r.wait != Wait::None {
                rep.note("wait before the first request dropped");
            }
            out.push('\n');
            rep.requests_out += 1;
        }
    }
    (out, rep)
}

/// Exports to CloudSuite's videosesslog syntax (`pace_time=`, `timeout=`
/// in whole seconds, `headers=` carrying the Range header, `session` lines).
pub fn export_cloudsuite(script: &Script) -> (String, ExportReport) {
    let mut rep = ExportReport {
        sessions_in: script.sessions.len(),
        ..Default::default()
    };
    let mut out = String::new();
    for s in &script.sessions {
        if rep.sessions_out > 0 {
            out.push('\n');
        }
        rep.sessions_out += 1;
        if s.header.server.is_some() || s.header.port.is_some() || s.header.ssl.is_some() {
            out.push_str("session");
            push_server(&mut out, s);
            out.push('\n');
        }
        for (i, r) in s.requests.iter().enumerate() {
            if r.burst {
                out.push_str("    ");
            }
            out.push_str(&absolute(&r.path));
            if r.method != Method::Get {
                let _ = write!(out, " method={}", r.method.as_str());
            }
            if let Some(t) = r.timeout_s {
                let whole = t.ceil();
                if whole != t {
                    rep.note("timeout rounded up to whole seconds");
                }
                let _ = write!(out, " timeout={}", whole as u64);
            }
            let mut headers = r.headers.clone();
            if let Some(range) = r.range {
                headers.insert(0, format!("Range: {}", range.header_value()));
            }
            if !headers.is_empty() {
                let _ = write!(out, " headers={}", quote(&headers.join("\r\n")));
            }
            if let Some(size) = r.size.or_else(|| r.range.and_then(|g| g.len())) {
                let _ = write!(out, " size={size}");
            }
            if let Some(b) = &r.body {
                let _ = write!(out, " contents={}", quote(b));
            }
            if !r.burst {
                match next_head(&s.requests, i).map(|r| r.wait) {
                    Some(Wait::Think(t)) => {
                        let _ = write!(out, " think={t}");
                    }
                    Some(Wait::Pacing(p)) => {
                        let _ = write!(out, " pace_time={p}");
                    }
                    _ => {}
                }
            }
            if r.conn != 0 {
                rep.note("connection index dropped");
            }
            if r.http10 {
                rep.note("http=1.0 dropped");
            }
            if r.stop_after.is_some() {
                rep.note("stop_after dropped (CloudSuite reads every response to its end)");
            }
            if r.read_kbps.is_some() {
                rep.note("read_kbps dropped (CloudSuite reads as fast as it can)");
            }
            if r.detach {
                rep.note("detach dropped (CloudSuite waits for every response)");
            }
            if i == 0 && r.wait != Wait::None {
                rep.note("wait before the first request dropped");
            }
            out.push('\n');
            rep.requests_out += 1;
        }
    }
    (out, rep)
}

/// Exports one session as an h2load `--timing-script-file`: one line per
/// request, `offset_ms<TAB>path`, offsets from the session start assuming
/// every response is instantaneous. h2load sends at those offsets whether or
/// not earlier responses are complete, and cannot send per-request headers,
/// so ranges are dropped (the whole file is requested).
pub fn export_h2load(session: &Session) -> (String, ExportReport) {
    let mut rep = ExportReport {
        sessions_in: 1,
        sessions_out: 1,
        ..Default::default()
    };
    let mut out = String::new();
    let mut t = 0.0f64;
    for (i, r) in session.requests.iter().enumerate() {
        if i > 0 && !r.burst {
            match r.wait {
                Wait::Pacing(p) => t += p,
                Wait::Think(th) => {
                    rep.note("think time added to the previous request's offset (response time assumed 0)");
                    t += th;
                }
                Wait::None => rep.note(
                    "back-to-back request sent at the previous offset (h2load does not wait for the response)",
                ),
            }
        }
        if r.range.is_some() {
            rep.note("Range header dropped: h2load requests the whole file");
        }
        if !r.headers.is_empty() {
            rep.note("request headers dropped");
        }
        if r.method != Method::Get || r.body.is_some() {
            rep.note("method/contents dropped (h2load sends GET)");
        }
        if r.timeout_s.is_some() {
            rep.note("per-request timeout dropped");
        }
        let _ = writeln!(out, "{:.3}\t{}", t * 1000.0, absolute(&r.path));
        rep.requests_out += 1;
    }
    (out, rep)
}

#[cfg(test)]
mod tests {
    use super::super::{parse_script, ByteRange};
    use super::*;

    fn paced() -> Script {
        parse_script(
            "/a timeout=10\n/b timeout=10\n/c timeout=10 pacing=10\n/d timeout=10 pacing=10\n",
        )
        .unwrap()
    }

    #[test]
    fn vodlab_writer_is_read_back_identically() {
        let s = paced();
        assert_eq!(parse_script(&write_vodlab(&s)).unwrap(), s);
    }

    #[test]
    fn httperf_export_converts_pacing_and_reports() {
        let (text, rep) = export_httperf(&paced());
        assert_eq!(text, "/a\n/b think=10\n/c think=10\n/d\n");
        assert_eq!(rep.requests_out, 4);
        assert_eq!(rep.notes.len(), 2, "{rep}");
        assert!(rep.to_string().contains("4 x per-request timeout dropped"));
    }

    #[test]
    fn httperf_export_leaves_out_range_sessions() {
        let mut s = paced();
        s.sessions[0].requests[1].range = Some(ByteRange {
            start: 0,
            end: Some(9),
        });
        s.sessions
            .push(parse_script("/z\n").unwrap().sessions.remove(0));
        let (text, rep) = export_httperf(&s);
        assert_eq!(text, "/z\n");
        assert_eq!((rep.sessions_in, rep.sessions_out), (2, 1));
    }

    #[test]
    fn cloudsuite_export_round_trips_through_reader() {
        let s = parse_script("/v range=0-99 timeout=10\n/v range=100-199 timeout=10 pacing=10\n")
            .unwrap();
        let (text, rep) = export_cloudsuite(&s);
        assert!(rep.is_lossless(), "{rep}");
        let back = parse_script(&text).unwrap();
        assert_eq!(back.sessions[0].requests[1].wait, Wait::Pacing(10.0));
        // the exported Range header reads back as the request's range
        assert!(back.sessions[0].requests[1].headers.is_empty());
        assert_eq!(
            back.sessions[0].requests[1].range,
            s.sessions[0].requests[1].range
        );
        assert_eq!(back.sessions[0].requests[1].size, Some(100));
    }

    #[test]
    fn h2load_offsets_follow_pacing() {
        let (text, rep) = export_h2load(&paced().sessions[0]);
        assert_eq!(text, "0.000\t/a\n0.000\t/b\n10000.000\t/c\n20000.000\t/d\n");
        assert!(!rep.is_lossless());
    }
}
