//! The checks a response must pass: the status a request expects, the
//! Content-Range and length of a range, the catalog's size of a whole file.
//! Pure; the session driver applies them to every response.

use vodlab_workload::script::{ByteRange, Request};

use crate::core::exchange::{ErrorKind, Failure, Response};

/// True when the request carries a `Range` header the script parser kept raw
/// (several ranges, a suffix range): its answer may be 200 or 206 and is not
/// checked byte for byte. A single range in a header is `Request::range`.
fn raw_range_header(r: &Request) -> bool {
    r.headers.iter().any(|h| {
        h.split_once(':')
            .is_some_and(|(n, _)| n.trim().eq_ignore_ascii_case("range"))
    })
}

/// Status, Content-Range and length checks of a response to `r`
/// (`expected_size`: the whole file's size, for unranged GETs).
pub fn check(r: &Request, resp: &Response, expected_size: Option<u64>) -> Result<(), Failure> {
    let range: Option<ByteRange> = r.range;
    if range.is_none() && raw_range_header(r) {
        return match resp.status {
            200 | 206 => Ok(()),
            s => Err(Failure::new(
                ErrorKind::BadStatus,
                format!("status {s} (expected 200 or 206)"),
            )),
        };
    }
    match (range, resp.status) {
        (Some(_), 206) | (None, 200) => {}
        (_, s) => {
            return Err(Failure::new(
                ErrorKind::BadStatus,
                format!(
                    "status {s} (expected {})",
                    if range.is_some() { 206 } else { 200 }
                ),
            ))
        }
    }
    if let Some(g) = range {
        let Some((a, b, total)) = resp.content_range else {
            return Err(Failure::new(
                ErrorKind::ContentMismatch,
                "206 without Content-Range",
            ));
        };
        let want_end = match (g.end, total) {
            (Some(e), Some(t)) => e.min(t.saturating_sub(1)),
            (Some(e), None) => e,
            (None, Some(t)) => t.saturating_sub(1),
            (None, None) => b,
        };
        if a != g.start || b != want_end {
            return Err(Failure::new(
                ErrorKind::ContentMismatch,
                format!("Content-Range {a}-{b} for requested {}", g.header_value()),
            ));
        }
        // stop_after=N: the client closed after N bytes
        let want = (b - a).saturating_add(1);
        let want = r.stop_after.map_or(want, |n| n.min(want));
        if resp.body_bytes != want {
            return Err(Failure::new(
                ErrorKind::ContentMismatch,
                format!("{} body bytes for range {a}-{b}", resp.body_bytes),
            ));
        }
    } else if let Some(n) = expected_size {
        if r.method.as_str() == "GET" && resp.body_bytes != n {
            return Err(Failure::new(
                ErrorKind::ContentMismatch,
                format!("{} body bytes, the catalog says {n}", resp.body_bytes),
            ));
        }
    }
    Ok(())
}
