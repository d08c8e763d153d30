//! Request heads and paths. Pure: bytes in, a request or a typed rejection out.

use std::path::{Component, Path, PathBuf};

/// Largest request head (request line and headers).
pub const MAX_HEAD: usize = 16 * 1024;
/// Most header fields.
pub const MAX_HEADERS: usize = 64;

/// A parsed request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// Method.
    pub method: String,
    /// Request target as sent.
    pub target: String,
    /// HTTP/1.1 (else 1.0).
    pub http11: bool,
    /// Header fields, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// Bytes the head took.
    pub len: usize,
}

impl Head {
    /// First value of a header (name in lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Whether the connection stays open after the response.
    pub fn keep_alive(&self) -> bool {
        let conn = self.header("connection").map(|v| v.to_ascii_lowercase());
        match conn.as_deref() {
            Some(v) if v.contains("close") => false,
            Some(v) if v.contains("keep-alive") => true,
            _ => self.http11,
        }
    }
}

/// Why a head was rejected (the status to answer with).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reject {
    /// 400.
    BadRequest,
    /// 431: head too large or too many fields.
    TooLarge,
    /// 505.
    Version,
}

/// Parses a request head from the start of `buf`: `Ok(None)` when more
/// bytes are needed.
pub fn parse_head(buf: &[u8]) -> Result<Option<Head>, Reject> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut fields);
    match req.parse(buf) {
        Ok(httparse::Status::Complete(len)) => {
            let http11 = match req.version {
                Some(1) => true,
                Some(0) => false,
                _ => return Err(Reject::Version),
            };
            let headers = req
                .headers
                .iter()
                .map(|h| {
                    (
                        h.name.to_ascii_lowercase(),
                        String::from_utf8_lossy(h.value).trim().to_string(),
                    )
                })
                .collect();
            Ok(Some(Head {
                method: req.method.unwrap_or("").to_string(),
                target: req.path.unwrap_or("").to_string(),
                http11,
                headers,
                len,
            }))
        }
        Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD => Err(Reject::TooLarge),
        Ok(httparse::Status::Partial) => Ok(None),
        Err(httparse::Error::TooManyHeaders) => Err(Reject::TooLarge),
        Err(httparse::Error::Version) => Err(Reject::Version),
        Err(_) => Err(Reject::BadRequest),
    }
}

/// Turns a request target into a path under `root`, or `None` when it is
/// malformed or would leave the root: percent-decoding is applied once,
/// `..`, NUL and backslashes are refused. Symlinks are checked by the caller
/// after opening ([`inside_root`]).
pub fn resolve_target(root: &Path, target: &str) -> Option<PathBuf> {
    let path = target.split(['?', '#']).next()?;
    if !path.starts_with('/') {
        return None;
    }
    let decoded = percent_decode(path)?;
    if decoded.contains('\0') || decoded.contains('\\') {
        return None;
    }
    let mut out = root.to_path_buf();
    for c in Path::new(&decoded).components() {
        match c {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(s) => out.push(s),
            Component::ParentDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// True when `path`, with symlinks resolved, is inside the canonical `root`.
pub fn inside_root(canonical_root: &Path, path: &Path) -> bool {
    std::fs::canonicalize(path).is_ok_and(|p| p.starts_with(canonical_root))
}

fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Content-Type by file extension.
pub fn content_type(path: &Path) -> &'static str {
    match path
        .extension()
        .and_then(|e| e.to_str())
        .map(|e| e.to_ascii_lowercase())
        .as_deref()
    {
        Some("mp4") | Some("m4v") => "video/mp4",
        Some("m4s") => "video/iso.segment",
        Some("m4a") => "audio/mp4",
        Some("ts") => "video/mp2t",
        Some("webm") => "video/webm",
        Some("mkv") => "video/x-matroska",
        Some("m3u8") => "application/vnd.apple.mpegurl",
        Some("mpd") => "application/dash+xml",
        Some("html") | Some("htm") => "text/html; charset=utf-8",
        Some("json") => "application/json",
        Some("txt") => "text/plain; charset=utf-8",
        Some("css") => "text/css",
        Some("js") => "text/javascript",
        Some("jpg") | Some("jpeg") => "image/jpeg",
        Some("png") => "image/png",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_parse_with_limits() {
        let h = parse_head(b"GET /a HTTP/1.1\r\nHost: x\r\nRange: bytes=0-1\r\n\r\nGET /b")
            .unwrap()
            .unwrap();
        assert_eq!(h.method, "GET");
        assert_eq!(h.target, "/a");
        assert_eq!(h.header("range"), Some("bytes=0-1"));
        assert!(h.keep_alive());
        assert_eq!(h.len, 46);
        assert_eq!(parse_head(b"GET /a HTTP/1.1\r\nHost:"), Ok(None));
        assert_eq!(parse_head(b"GET /a FTP/1.1\r\n\r\n"), Err(Reject::Version));
        let many: String = (0..70).map(|i| format!("X-{i}: y\r\n")).collect();
        assert_eq!(
            parse_head(format!("GET / HTTP/1.1\r\n{many}\r\n").as_bytes()),
            Err(Reject::TooLarge)
        );
        let big = format!("GET /{} HTTP/1.1\r\n", "a".repeat(MAX_HEAD));
        assert_eq!(parse_head(big.as_bytes()), Err(Reject::TooLarge));
        let h10 = parse_head(b"GET / HTTP/1.0\r\n\r\n").unwrap().unwrap();
        assert!(!h10.keep_alive());
    }

    #[test]
    fn traversal_is_refused() {
        let root = Path::new("/srv/v");
        assert_eq!(
            resolve_target(root, "/t1/sd.mp4?x=1"),
            Some(PathBuf::from("/srv/v/t1/sd.mp4"))
        );
        assert_eq!(
            resolve_target(root, "/a%20b"),
            Some(PathBuf::from("/srv/v/a b"))
        );
        for bad in [
            "/../etc/passwd",
            "/a/../../etc",
            "/%2e%2e/etc/passwd",
            "/%2E%2E%2Fetc",
            "/a%00b",
            "/a\\..\\b",
            "a",
            "/%zz",
            "/%c0%ae%c0%ae/",
        ] {
            assert_eq!(resolve_target(root, bad), None, "{bad}");
        }
    }
}

#[cfg(test)]
mod robustness {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// Arbitrary bytes never panic the head parser or the path resolver,
        /// and a resolved path never leaves the root.
        #[test]
        fn arbitrary_heads_and_targets(bytes in proptest::collection::vec(any::<u8>(), 0..600), target in "[/a-z%.2eEfF5c\\\\?#]{0,40}") {
            let _ = parse_head(&bytes);
            let mut req = b"GET ".to_vec();
            req.extend_from_slice(&bytes);
            let _ = parse_head(&req);
            if let Some(p) = resolve_target(Path::new("/srv/root"), &target) {
                prop_assert!(p.starts_with("/srv/root"));
                prop_assert!(!p.components().any(|c| c == Component::ParentDir));
            }
            let _ = crate::range::parse(&String::from_utf8_lossy(&bytes));
        }
    }
}
