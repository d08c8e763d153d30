//! Response decoder: never panics; fed the same bytes in any pieces it
//! reaches the same outcome (head, body bytes at the same offsets, bytes
//! consumed) as fed at once, and consumes nothing past a complete response.
#![no_main]
use libfuzzer_sys::fuzz_target;
use vodlab_http::client::{DecodeError, Decoded, ResponseDecoder, ResponseHead};

#[derive(Debug, PartialEq)]
struct Outcome {
    head: ResponseHead,
    body: Vec<u8>,
    consumed: usize,
}

/// Feeds `data` in pieces of `sizes` (cycled; one piece if empty) the way a
/// connection does, then signals end of stream if still incomplete.
fn decode(data: &[u8], sizes: &[u16], head_request: bool) -> Result<Outcome, DecodeError> {
    let mut dec = ResponseDecoder::new(head_request);
    let mut pending = Vec::new();
    let mut body = Vec::new();
    let mut consumed = 0;
    let mut from = 0;
    let mut i = 0;
    while from < data.len() {
        let n = match sizes.get(i % sizes.len().max(1)) {
            Some(&s) => (s as usize).max(1),
            None => data.len(),
        };
        i += 1;
        let to = (from + n).min(data.len());
        pending.extend_from_slice(&data[from..to]);
        from = to;
        let p = dec.feed(&pending, &mut |off: u64, b: &[u8]| {
            assert_eq!(off, body.len() as u64);
            body.extend_from_slice(b);
        })?;
        assert!(p.consumed <= pending.len());
        consumed += p.consumed;
        pending.drain(..p.consumed);
        if p.state == Decoded::Complete {
            assert!(dec.is_complete());
            break;
        }
    }
    if !dec.is_complete() {
        dec.eof()?;
    }
    assert_eq!(dec.body_bytes(), body.len() as u64);
    let head = *dec.head().expect("a complete response has a head");
    assert!(consumed as u64 >= head.header_bytes + body.len() as u64);
    Ok(Outcome {
        head,
        body,
        consumed,
    })
}

fuzz_target!(|input: (bool, Vec<u16>, &[u8])| {
    let (head_request, sizes, data) = input;
    let whole = decode(data, &[], head_request);
    let split = decode(data, &sizes, head_request);
    match (&whole, &split) {
        (Ok(a), Ok(b)) => {
            assert_eq!(a, b);
            assert!(a.consumed <= data.len());
        }
        (Err(_), Err(_)) => {}
        _ => panic!("whole {whole:?} but split {split:?}"),
    }
});
