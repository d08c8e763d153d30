//! Next-object prefetch (`vodlab serve --prefetch-next-object`): the
//! decisions, without I/O. A request whose CMCD names the object the
//! player will ask for next (`nor`, a URL relative to the request's, and
//! optionally `nrr`, its byte range) lets the server read that object into
//! the page cache before it is asked for. The size policy sizes the
//! current object's prefetch as before; this adds one read per `nor`
//! target: its first `cap` bytes (or its `nrr` range, clipped to `cap`),
//! unless they are resident already.
//!
//! [`resolve`] turns a `nor` value into a request target under the root
//! (the server's own routing then maps it to a file and refuses what would
//! leave the root); [`decide`] says which bytes to read.

/// Bytes of a `nor` target read when the flag gives no size: the whole
/// object up to this cap (a media segment of a few seconds fits).
pub const DEFAULT_NEXT_OBJECT_BYTES: u64 = 4 << 20;

/// Most `nor` targets of one request prefetched (CMCD 2 allows a list;
/// the rest are ignored, so one request cannot queue unbounded reads).
pub const MAX_PER_REQUEST: usize = 4;

/// Resolves `nor`, a relative reference (RFC 3986 §5.2; CMCD 1: "relative
/// path of the next object"), against the path of the request target
/// `base` (query and fragment ignored). Returns the target's path, from
/// `/`, still percent-encoded as sent, with `.` and `..` segments removed;
/// `None` for a reference with a scheme or authority (another server's
/// object), an empty one, or one whose `..` climbs above the root.
pub fn resolve(base: &str, nor: &str) -> Option<String> {
    let nor = nor.split(['?', '#']).next().unwrap_or("");
    if nor.is_empty() || nor.starts_with("//") {
        return None;
    }
    // a scheme: letters, digits, `+`, `-`, `.` before a `:` in the first segment
    if let Some(colon) = nor.find(':') {
        if !nor[..colon].contains('/') {
            return None;
        }
    }
    let base = base.split(['?', '#']).next().unwrap_or("");
    let merged = if nor.starts_with('/') {
        nor.to_string()
    } else {
        let dir = match base.rfind('/') {
            Some(i) => &base[..=i],
            None => "/",
        };
        format!("{dir}{nor}")
    };
    let mut out: Vec<&str> = Vec::new();
    let segs: Vec<&str> = merged.split('/').skip(1).collect();
    let last = segs.len().saturating_sub(1);
    for (i, s) in segs.iter().enumerate() {
        match *s {
            "." => {}
            ".." => {
                out.pop()?;
            }
            "" if i != last => {}
            s => out.push(s),
        }
    }
    // a directory (`dir/`, `.`, `..`) names no object
    if out.last().is_none_or(|s| s.is_empty()) || matches!(segs.last(), Some(&".") | Some(&"..")) {
        return None;
    }
    Some(format!("/{}", out.join("/")))
}

/// The byte range `nrr` gives (`"A-B"`, inclusive, or `"A-"` to the end),
/// as `(offset, end_exclusive)`; `None` when it is not one.
pub fn nrr_range(nrr: &str) -> Option<(u64, Option<u64>)> {
    let (a, b) = nrr.trim().split_once('-')?;
    let a: u64 = a.trim().parse().ok()?;
    let b = b.trim();
    if b.is_empty() {
        return Some((a, None));
    }
    let b: u64 = b.parse().ok()?;
    (b >= a).then_some((a, Some(b + 1)))
}

/// What to do with one `nor` target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextRead {
    /// Read `[offset, offset + len)` into the page cache.
    Read {
        /// First byte.
        offset: u64,
        /// Bytes.
        len: u64,
    },
    /// Those bytes are in the page cache already.
    Resident,
    /// Nothing to read (an empty file, a range past its end).
    Nothing,
}

/// Which bytes of a `nor` target of `size` bytes to read: `range` (from
/// `nrr`, see [`nrr_range`]) or the whole object, clipped to the file and to
/// `cap` bytes from its start; `resident(offset, len)` probes the page
/// cache.
pub fn decide(
    size: u64,
    range: Option<(u64, Option<u64>)>,
    cap: u64,
    resident: impl FnOnce(u64, u64) -> bool,
) -> NextRead {
    let (a, end) = range.unwrap_or((0, None));
    let end = end.unwrap_or(size).min(size);
    if a >= end || cap == 0 {
        return NextRead::Nothing;
    }
    let len = (end - a).min(cap);
    if resident(a, len) {
        NextRead::Resident
    } else {
        NextRead::Read { offset: a, len }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nor_is_resolved_against_the_request_path() {
        let base = "/t1/sd/00004.m4s?CMCD=x";
        for (nor, want) in [
            ("00005.m4s", Some("/t1/sd/00005.m4s")),
            ("./00005.m4s", Some("/t1/sd/00005.m4s")),
            ("../hd/00005.m4s", Some("/t1/hd/00005.m4s")),
            ("../../t2/a.m4s?x=1#f", Some("/t2/a.m4s")),
            ("/abs/seg.m4s", Some("/abs/seg.m4s")),
            ("a%20b.m4s", Some("/t1/sd/a%20b.m4s")),
            ("x//y/./z.m4s", Some("/t1/sd/x/y/z.m4s")),
            // leaving the root, another server, directories, nothing
            ("../../../etc/passwd", None),
            ("/../etc/passwd", None),
            ("http://other/x.m4s", None),
            ("//other/x.m4s", None),
            ("", None),
            ("..", None),
            ("sub/", None),
            (".", None),
        ] {
            assert_eq!(resolve(base, nor).as_deref(), want, "{nor}");
        }
        assert_eq!(resolve("/v.mp4", "w.mp4").as_deref(), Some("/w.mp4"));
        assert_eq!(resolve("/v.mp4", "../w.mp4"), None);
        // a colon after a slash is part of a path, not a scheme
        assert_eq!(resolve("/a/b", "c/d:e").as_deref(), Some("/a/c/d:e"));
    }

    #[test]
    fn nrr_ranges() {
        assert_eq!(nrr_range("100-199"), Some((100, Some(200))));
        assert_eq!(nrr_range("100-"), Some((100, None)));
        assert_eq!(nrr_range("-100"), None);
        assert_eq!(nrr_range("9-3"), None);
        assert_eq!(nrr_range("x"), None);
    }

    #[test]
    fn the_read_is_the_object_or_its_range_up_to_the_cap_unless_resident() {
        let cold = |_, _| false;
        assert_eq!(
            decide(1000, None, 4096, cold),
            NextRead::Read {
                offset: 0,
                len: 1000
            }
        );
        assert_eq!(
            decide(10 << 20, None, 4 << 20, cold),
            NextRead::Read {
                offset: 0,
                len: 4 << 20
            }
        );
        assert_eq!(
            decide(1000, Some((100, Some(200))), 4096, cold),
            NextRead::Read {
                offset: 100,
                len: 100
            }
        );
        assert_eq!(
            decide(1000, Some((900, None)), 50, cold),
            NextRead::Read {
                offset: 900,
                len: 50
            }
        );
        assert_eq!(
            decide(1000, Some((100, Some(5000))), 4096, cold),
            NextRead::Read {
                offset: 100,
                len: 900
            }
        );
        assert_eq!(
            decide(1000, Some((1000, None)), 4096, cold),
            NextRead::Nothing
        );
        assert_eq!(decide(0, None, 4096, cold), NextRead::Nothing);
        let mut asked = None;
        let r = decide(1000, None, 4096, |o, n| {
            asked = Some((o, n));
            true
        });
        assert_eq!((r, asked), (NextRead::Resident, Some((0, 1000))));
    }
}
