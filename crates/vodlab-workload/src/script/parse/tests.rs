//! Tests of `parse.rs`.

use super::*;
use crate::script::write_vodlab;

const FIGURE_5: &str = "\
# Session 1: 4 chunks stored in separate files, with pacing
#           after the first two requests
vid01/secs-0-9 timeout=10
vid01/secs-10-19 timeout=10
vid01/secs-20-29 timeout=10 pacing=10
vid01/secs-30-39 timeout=10 pacing=10

# Session 2: 3 chunks with range requests within the same file,
#           with no pacing
vid02 range=0-524287 timeout=10
vid02 range=524288-1048575 timeout=10
vid02 range=1048575-1572863 timeout=10

# Session 4: pause/rewind/skip forward
vid04/secs-0-9 timeout=10
vid04/secs-10-19 timeout=10 pacing=60 # pause for 60 seconds
vid04/secs-20-29 timeout=10
";

#[test]
fn systor_figure_5_parses() {
    let s = parse_script(FIGURE_5).unwrap();
    assert_eq!(s.sessions.len(), 3);
    assert_eq!(s.request_count(), 10);
    let r = &s.sessions[0].requests[2];
    assert_eq!(r.path, "vid01/secs-20-29");
    assert_eq!(r.timeout_s, Some(10.0));
    assert_eq!(r.wait, Wait::Pacing(10.0));
    assert_eq!(
        s.sessions[1].requests[1].range,
        Some(ByteRange {
            start: 524288,
            end: Some(1048575)
        })
    );
    assert_eq!(s.sessions[2].requests[1].wait, Wait::Pacing(60.0));
}

#[test]
fn httperf_wsesslog_bursts_and_think() {
    let text = "# comment\n/foo.html think=2.0\n    /pict1.gif\n\t/pict2.gif\n/foo2.html method=POST contents='Post data with spaces'\n\n/x.html\n";
    let s = parse_script(text).unwrap();
    assert_eq!(s.sessions.len(), 2);
    let r = &s.sessions[0].requests;
    assert!(r[1].burst && r[2].burst && !r[3].burst);
    assert_eq!(r[3].wait, Wait::Think(2.0));
    assert_eq!(r[3].method, Method::Post);
    assert_eq!(r[3].body.as_deref(), Some("Post data with spaces"));
    assert_eq!(s.sessions[1].requests[0].wait, Wait::None);
}

#[test]
fn cloudsuite_videosesslog() {
    let text = "session server=10.0.0.1 port=8080 ssl=off\n/video/a_240p.mp4 timeout=10 headers=\"Range: bytes=0-524287\" pace_time=10 size=524288\n/video/a_240p.mp4 timeout=10 headers='Range: bytes=524288-1048575\\r\\nX-A: b'\n";
    let s = parse_script(text).unwrap();
    let sess = &s.sessions[0];
    assert_eq!(sess.header.server.as_deref(), Some("10.0.0.1"));
    assert_eq!(sess.header.port, Some(8080));
    assert_eq!(sess.header.ssl, Some(false));
    // the Range header is the request's range (checked like `range=`), not a raw header
    let r0 = &sess.requests[0];
    assert!(r0.headers.is_empty(), "{:?}", r0.headers);
    assert_eq!(
        r0.range,
        Some(ByteRange {
            start: 0,
            end: Some(524287)
        })
    );
    assert_eq!(r0.size, Some(524288));
    assert_eq!(sess.requests[1].wait, Wait::Pacing(10.0));
    assert_eq!(sess.requests[1].headers, vec!["X-A: b"]);
    assert_eq!(
        sess.requests[1].range,
        Some(ByteRange {
            start: 524288,
            end: Some(1048575)
        })
    );
}

#[test]
fn cloudsuite_make_zipf_lines_carry_their_range() {
    // exactly what CloudSuite's make_zipf.c writes
    let text = "/full-360p-00186.mp4 timeout=10 headers='Range: bytes=0-1310719'\n/full-360p-00186.mp4 timeout=10 headers='Range: bytes=1310720-2621439'\n/full-360p-00186.mp4 timeout=10 headers='Range: bytes=2621440-3932159'\n/full-360p-00186.mp4 timeout=10 pace_time=10 headers='Range: bytes=3932160-5242879'\n";
    let s = parse_script(text).unwrap();
    let r = &s.sessions[0].requests;
    assert_eq!(r.len(), 4);
    assert!(r.iter().all(|q| q.headers.is_empty() && q.range.is_some()));
    assert_eq!(
        r[3].range,
        Some(ByteRange {
            start: 3932160,
            end: Some(5242879)
        })
    );
    // open-ended, lower-case name; a multi-range stays a raw header
    let s =
        parse_script("/a headers='range: bytes=5-'\n/b headers='Range: bytes=0-1,5-9'\n").unwrap();
    let r = &s.sessions[0].requests;
    assert_eq!(
        r[0].range,
        Some(ByteRange {
            start: 5,
            end: None
        })
    );
    assert_eq!(r[1].range, None);
    assert_eq!(r[1].headers, vec!["Range: bytes=0-1,5-9"]);
    // two ranges for one request are an error naming the line
    let e = parse_script("/a range=0-9 headers='Range: bytes=0-1'\n").unwrap_err();
    assert!(e.to_string().contains("two ranges"), "{e}");
}

#[test]
fn vodlab_header_and_conn() {
    let text = "#@session id=7 class=10mbit title=t00001 rank=3 rep=sd bitrate=419430 request_s=10\n/a range=0- conn=1\n";
    let s = parse_script(text).unwrap();
    let h = &s.sessions[0].header;
    assert_eq!(h.id, Some(7));
    assert_eq!(h.class.as_deref(), Some("10mbit"));
    assert_eq!(h.rank, Some(3));
    assert_eq!(h.request_s, Some(10.0));
    assert_eq!(s.sessions[0].requests[0].conn, 1);
    assert_eq!(s.sessions[0].requests[0].range.unwrap().end, None);
}

fn error_of(text: &str) -> ParseError {
    parse_script(text).unwrap_err()
}

#[test]
fn errors_name_line_and_column() {
    let e = error_of("/a\n/b timeout=10 colour=red\n");
    assert_eq!(
        (e.line, e.column, e.kind),
        (2, 15, ParseErrorKind::UnknownKey)
    );
    assert!(
        e.to_string()
            .starts_with("line 2, column 15: unknown key `colour`"),
        "{e}"
    );

    let e = error_of("/a range=10-5\n");
    assert_eq!((e.line, e.column, e.kind), (1, 4, ParseErrorKind::BadValue));

    let e = error_of("/a timeout=0\n");
    assert_eq!(e.kind, ParseErrorKind::BadValue);

    let e = error_of("/a timeout=1 timeout=2\n");
    assert_eq!((e.column, e.kind), (14, ParseErrorKind::DuplicateKey));

    let e = error_of("   /burst-first\n");
    assert_eq!(e.kind, ParseErrorKind::Misplaced);

    let e = error_of("/a contents='open\n");
    assert_eq!(e.kind, ParseErrorKind::UnterminatedQuote);

    let e = error_of("/a think=1\n/b pacing=2\n");
    assert_eq!((e.line, e.kind), (2, ParseErrorKind::DuplicateKey));

    let e = error_of("/a\n#@session id=1\n");
    assert_eq!((e.line, e.kind), (2, ParseErrorKind::Misplaced));

    let e = error_of("/a\n  /b pacing=1\n");
    assert_eq!((e.line, e.column), (2, 6));
}

#[test]
fn quotes_and_backslashes_are_literal_outside_quotable_values() {
    // a path may hold an apostrophe (a valid URI character); only contents=,
    // headers= and cookie= values are quoted, as in httperf
    let s = parse_script("/it's/a\\b.mp4 timeout=1 contents='a b'\n").unwrap();
    let r = &s.sessions[0].requests[0];
    assert_eq!(r.path, "/it's/a\\b.mp4");
    assert_eq!(r.body.as_deref(), Some("a b"));
    let e = parse_script("/a cookie='x\\ny'\n").unwrap_err();
    assert_eq!(e.kind, ParseErrorKind::BadValue);
}

#[test]
fn crlf_and_blank_lines() {
    let s = parse_script("/a\r\n\r\n\r\n/b\r\n").unwrap();
    assert_eq!(s.sessions.len(), 2);
    assert_eq!(s.sessions[1].requests[0].path, "/b");
}

#[test]
fn stop_after_needs_an_open_ended_range_and_round_trips() {
    let s = parse_script("/a.mp4 range=0- stop_after=786432 conn=2\n").unwrap();
    let r = &s.sessions[0].requests[0];
    assert_eq!(r.stop_after, Some(786_432));
    assert_eq!(r.range.unwrap().end, None);
    assert_eq!(parse_script(&crate::script::write_vodlab(&s)).unwrap(), s);
    // the key may come before the range on the line
    let s = parse_script("/a.mp4 stop_after=10 range=5-\n").unwrap();
    assert_eq!(s.sessions[0].requests[0].stop_after, Some(10));

    let e = error_of("/a.mp4 range=0-99 stop_after=10\n");
    assert_eq!((e.column, e.kind), (19, ParseErrorKind::Misplaced));
    let e = error_of("/a.mp4 stop_after=10\n");
    assert_eq!(e.kind, ParseErrorKind::Misplaced);
    let e = error_of("/a.mp4 range=0- stop_after=0\n");
    assert_eq!(e.kind, ParseErrorKind::BadValue);
    let e = error_of("/a.mp4 range=0- stop_after=9007199254740992\n");
    assert_eq!(e.kind, ParseErrorKind::BadValue);
}

#[test]
fn read_kbps_is_bounded_and_round_trips() {
    let s = parse_script("/a.mp4 range=0- stop_after=1000 read_kbps=1750\n/b.mp4 read_kbps=1\n")
        .unwrap();
    assert_eq!(s.sessions[0].requests[0].read_kbps, Some(1750));
    assert_eq!(s.sessions[0].requests[1].read_kbps, Some(1));
    assert_eq!(parse_script(&crate::script::write_vodlab(&s)).unwrap(), s);
    assert_eq!(error_of("/a read_kbps=0\n").kind, ParseErrorKind::BadValue);
    assert_eq!(
        error_of("/a read_kbps=1000000001\n").kind,
        ParseErrorKind::BadValue
    );
    assert_eq!(
        error_of("/a read_kbps=fast\n").kind,
        ParseErrorKind::BadValue
    );
}

#[test]
fn detach_is_a_flag_that_round_trips() {
    let s = parse_script(
        "/a.mp4 range=0- stop_after=1000 read_kbps=96 detach=1 conn=3\n/b.mp4 detach=0\n",
    )
    .unwrap();
    assert!(s.sessions[0].requests[0].detach);
    assert!(!s.sessions[0].requests[1].detach);
    let text = write_vodlab(&s);
    assert!(text.contains(" detach=1"), "{text}");
    assert_eq!(parse_script(&text).unwrap(), s);
    assert_eq!(error_of("/a detach=yes\n").kind, ParseErrorKind::BadValue);
}

/// Streams `text` and checks the sessions against `parse_script`'s and each
/// span against the session it names.
fn stream_agrees(text: &str) {
    let whole = parse_script(text).unwrap();
    let mut got = Vec::new();
    let n = parse_script_stream(text.as_bytes(), |s, span| got.push((s, span))).unwrap();
    assert_eq!(n, whole.sessions.len());
    assert_eq!(got.len(), whole.sessions.len());
    for ((s, span), want) in got.iter().zip(&whole.sessions) {
        assert_eq!(s, want);
        let slice = &text[span.offset as usize..(span.offset + span.len) as usize];
        let again = parse_script(slice).unwrap();
        assert_eq!(again.sessions.len(), 1, "span {span:?}: {slice:?}");
        assert_eq!(&again.sessions[0], want, "span {span:?}: {slice:?}");
    }
}

#[test]
fn a_streamed_script_gives_the_same_sessions_and_spans_that_hold_them() {
    stream_agrees(FIGURE_5);
    // bursts and think times, comments before and inside sessions
    stream_agrees("# comment\n/foo.html think=2.0\n    /pict1.gif\n\t/pict2.gif\n/foo2.html method=POST contents='Post data with spaces'\n\n/x.html\n");
    // CloudSuite `session` lines, CRLF line ends, no newline at the end
    stream_agrees("session server=10.0.0.1 port=8080\r\n/a timeout=10 pace_time=10\r\n/b\r\n\r\n\r\nsession server=10.0.0.2\r\n/c");
    // vodlab headers; a header alone before a blank line joins the next session
    stream_agrees("#@session id=1 class=a\n/a range=0-9\n/b pacing=5\n\n#@session id=2\n\n/c\n\n\n#@session id=3 title=t rep=sd\n/d conn=1\n/e\n");
    // what `write_vodlab` writes
    let s = parse_script(FIGURE_5).unwrap();
    stream_agrees(&write_vodlab(&s));
    // nothing at all
    stream_agrees("");
    stream_agrees("# only a comment\n\n");
}

#[test]
fn a_streamed_script_names_the_line_of_its_mistakes() {
    let e = parse_script_stream("/a\n/b bogus=1\n".as_bytes(), |_, _| {}).unwrap_err();
    let StreamError::Parse(e) = e else {
        panic!("{e}")
    };
    assert_eq!((e.line, e.kind), (2, ParseErrorKind::UnknownKey));
    assert_eq!(e, parse_script("/a\n/b bogus=1\n").unwrap_err());
    let bytes = b"/a\n/\xffb\n";
    let StreamError::Parse(e) = parse_script_stream(&bytes[..], |_, _| {}).unwrap_err() else {
        panic!()
    };
    assert_eq!(e, parse_script_bytes(bytes).unwrap_err());
}
