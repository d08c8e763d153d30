//! Request paths: targets to paths under the root, content types. Pure.
//! (The request-head parser is the codec's: [`vodlab_http::server::parse_head`].)

use std::path::{Component, Path, PathBuf};

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

/// The chain a target belongs to: its directory (`/t1` for
/// `/t1/00000.m4s`), or `""` for files at the root.
pub fn chain_of(target: &str) -> &str {
    let path = target.split(['?', '#']).next().unwrap_or("");
    match path.rfind('/') {
        Some(0) | None => "",
        Some(i) => &path[..i],
    }
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

/// Whether a Range header value is one open-ended range, `bytes=A-`.
pub(crate) fn open_ended_range(v: &str) -> bool {
    v.trim().strip_prefix("bytes=").is_some_and(|r| {
        !r.contains(',') && r.trim_end().ends_with('-') && !r.trim().starts_with('-')
    })
}

#[cfg(test)]
mod open_ended_tests {
    #[test]
    fn open_ended_ranges_are_told_apart() {
        use super::open_ended_range as o;
        assert!(o("bytes=100-"));
        assert!(o("bytes=0-"));
        assert!(!o("bytes=0-99"));
        assert!(!o("bytes=-500"));
        assert!(!o("bytes=0-,10-20"));
        assert!(!o("items=0-"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chains() {
        assert_eq!(chain_of("/t1/00000.m4s?x=1"), "/t1");
        assert_eq!(chain_of("/a/b/c.ts"), "/a/b");
        assert_eq!(chain_of("/v.mp4"), "");
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
            let _ = vodlab_http::server::parse_head(&bytes);
            let mut req = b"GET ".to_vec();
            req.extend_from_slice(&bytes);
            let _ = vodlab_http::server::parse_head(&req);
            if let Some(p) = resolve_target(Path::new("/srv/root"), &target) {
                prop_assert!(p.starts_with("/srv/root"));
                prop_assert!(!p.components().any(|c| c == Component::ParentDir));
            }
            let _ = crate::range::parse(&String::from_utf8_lossy(&bytes));
        }
    }
}
