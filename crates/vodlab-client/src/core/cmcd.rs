//! Common Media Client Data (CTA-5004) a player sends with its requests, in
//! header transmission mode: `CMCD-Object` (`br` encoded bit rate in kbit/s,
//! `d` object duration in ms, `ot` object type), `CMCD-Request` (`bl` buffer
//! length in ms, rounded to 100 ms) and `CMCD-Session` (`sid`). Keys are in
//! alphabetical order within each header, as the specification recommends.
//! Encoded by `vodlab-cmcd`, the one CMCD module the server parses with;
//! `vodlab serve` reads `br`, `bl` and `rtp` for pacing and prefetch sizes.

/// What a request tells the server.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cmcd<'a> {
    /// Encoded bit rate of the object, bit/s.
    pub bitrate_bps: u64,
    /// Duration of the object (the request's content), seconds.
    pub duration_s: Option<f64>,
    /// Object type token: `v` video, `a` audio, `av` muxed, `m` manifest, `i` init.
    pub object_type: &'a str,
    /// Buffer length, seconds.
    pub buffer_s: Option<f64>,
    /// Session id.
    pub session: u64,
}

impl Cmcd<'_> {
    /// The header lines (`Name: value`), to append to a request's headers.
    pub fn headers(&self) -> Vec<String> {
        let c = vodlab_cmcd::Cmcd {
            br: Some((self.bitrate_bps as f64 / 1000.0).round() as u64),
            d: self
                .duration_s
                .filter(|d| d.is_finite() && *d > 0.0)
                .map(|d| (d * 1000.0).round() as u64),
            ot: vodlab_cmcd::ObjectType::from_token(self.object_type),
            // rounded to 100 ms, as the specification asks
            bl: self
                .buffer_s
                .filter(|b| b.is_finite() && *b >= 0.0)
                .map(|b| ((b * 10.0).round() as u64) * 100),
            sid: Some(format!("vodlab-{}", self.session)),
            ..vodlab_cmcd::Cmcd::default()
        };
        c.to_headers()
            .into_iter()
            .map(|(h, list)| format!("{}: {list}", h.name()))
            .collect()
    }
}

/// What a closed-loop player (`run --player`) tells the server with each
/// request, from its own state: the object and its bit rate, the top bit
/// rate, the buffer, its throughput estimate, whether it is starting up.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlayerReport {
    /// The object: the manifest, an init segment or a media segment.
    pub object: vodlab_cmcd::ObjectType,
    /// Encoded bit rate of the object's rendition, kbit/s (media and init).
    pub br_kbps: Option<f64>,
    /// Top bit rate of the rendition set, kbit/s.
    pub top_kbps: Option<f64>,
    /// Duration of the object, ms (media segments).
    pub duration_ms: Option<f64>,
    /// Buffer level, ms (rounded to 100 ms as the specification asks).
    pub buffer_ms: Option<f64>,
    /// The player's throughput estimate, kbit/s (rounded to 100 kbit/s).
    pub measured_kbps: Option<f64>,
    /// The player has not started playing yet (`su`: needed urgently).
    pub startup: bool,
    /// DASH or HLS.
    pub format: vodlab_cmcd::StreamingFormat,
    /// Session id.
    pub session: u64,
}

impl PlayerReport {
    /// The keys, as `vodlab-cmcd` encodes them.
    pub fn cmcd(&self) -> vodlab_cmcd::Cmcd {
        let whole = |v: Option<f64>| v.filter(|x| x.is_finite() && *x >= 0.0);
        vodlab_cmcd::Cmcd {
            ot: Some(self.object),
            br: whole(self.br_kbps).map(|b| b.round() as u64),
            tb: whole(self.top_kbps).map(|b| b.round() as u64),
            d: whole(self.duration_ms).map(|d| d.round() as u64),
            bl: whole(self.buffer_ms).map(|b| ((b / 100.0).round() as u64) * 100),
            mtp: whole(self.measured_kbps).map(|m| ((m / 100.0).round() as u64) * 100),
            su: self.startup,
            sf: Some(self.format),
            st: Some(vodlab_cmcd::StreamType::Vod),
            sid: Some(format!("vodlab-{}", self.session)),
            ..vodlab_cmcd::Cmcd::default()
        }
    }

    /// The header lines (`Name: value`), to append to the request's headers.
    pub fn headers(&self) -> Vec<String> {
        self.cmcd()
            .to_headers()
            .into_iter()
            .map(|(h, list)| format!("{}: {list}", h.name()))
            .collect()
    }
}

/// Whether a request's own headers already carry CMCD (a script may write
/// them; they are then sent as written).
pub fn present(headers: &[String]) -> bool {
    headers.iter().any(|h| {
        h.split_once(':')
            .is_some_and(|(n, _)| n.trim().to_ascii_lowercase().starts_with("cmcd"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_mode_lines_as_cta_5004_writes_them() {
        let c = Cmcd {
            bitrate_bps: 3_200_000,
            duration_s: Some(4.004),
            object_type: "v",
            buffer_s: Some(21.34),
            session: 42,
        };
        assert_eq!(
            c.headers(),
            vec![
                "CMCD-Object: br=3200,d=4004,ot=v".to_string(),
                "CMCD-Request: bl=21300".into(),
                "CMCD-Session: sid=\"vodlab-42\"".into(),
            ]
        );
        let bare = Cmcd {
            duration_s: None,
            buffer_s: None,
            ..c
        };
        assert_eq!(bare.headers()[0], "CMCD-Object: br=3200,ot=v");
        assert_eq!(bare.headers().len(), 2);
        assert!(present(&["cmcd-object: br=1".into()]));
        // a player's report: every key from its state, in the right header
        let p = PlayerReport {
            object: vodlab_cmcd::ObjectType::Video,
            br_kbps: Some(2095.4),
            top_kbps: Some(4000.0),
            duration_ms: Some(4000.0),
            buffer_ms: Some(12_340.0),
            measured_kbps: Some(5_432.0),
            startup: true,
            format: vodlab_cmcd::StreamingFormat::Dash,
            session: 7,
        };
        assert_eq!(
            p.headers(),
            vec![
                "CMCD-Object: br=2095,d=4000,ot=v,tb=4000".to_string(),
                "CMCD-Request: bl=12300,mtp=5400,su".into(),
                "CMCD-Session: sf=d,sid=\"vodlab-7\",st=v".into(),
            ]
        );
        let back = vodlab_cmcd::Cmcd::from_headers(|n| {
            p.headers().into_iter().find_map(|l| {
                let (k, v) = l.split_once(": ").unwrap();
                (k.to_ascii_lowercase() == n).then(|| &*Box::leak(v.to_string().into_boxed_str()))
            })
        });
        assert_eq!(back, p.cmcd());
        assert!(!present(&["X-Other: cmcd".into()]));
    }

    #[test]
    fn the_server_reads_back_what_the_client_writes() {
        // vodlab serve's parser takes the bit rate from br (kbit/s)
        let c = Cmcd {
            bitrate_bps: 419_430,
            duration_s: Some(10.0),
            object_type: "v",
            buffer_s: Some(0.0),
            session: 1,
        };
        let h = c.headers();
        let r = vodlab_workload::script::Request {
            headers: h,
            ..vodlab_workload::script::Request::get("/v")
        };
        assert_eq!(
            crate::core::delivery::request_bitrate(&r, None),
            Some(419_000)
        );
    }
}
