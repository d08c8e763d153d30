//! Tests of `runner`.

use super::*;
use std::io::{Read, Write};
use std::net::TcpListener;

/// A one-shot server answering with `reply`; returns its address and
/// the request it received.
fn serve(reply: &'static [u8]) -> (SocketAddr, std::thread::JoinHandle<Vec<u8>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let h = std::thread::spawn(move || {
        let (mut c, _) = l.accept().unwrap();
        let mut req = Vec::new();
        let mut buf = [0u8; 1024];
        while !req.ends_with(b"\r\n\r\n") {
            let n = c.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            req.extend_from_slice(&buf[..n]);
        }
        c.write_all(reply).unwrap();
        req
    });
    (addr, h)
}

#[test]
fn stats_are_fetched_through_the_codec() {
    let (addr, h) = serve(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n\
          6\r\n{\"requ\r\n9\r\nests\": 7}\r\n0\r\n\r\n",
    );
    let v = fetch_vodlab_stats(addr).expect("stats");
    assert_eq!(v["requests"], 7);
    let req = String::from_utf8(h.join().unwrap()).unwrap();
    assert!(
        req.starts_with("GET /vodlab/stats HTTP/1.1\r\nHost: vodlab\r\n"),
        "{req}"
    );
    assert!(req.contains("\r\nConnection: close\r\n"), "{req}");
}

/// A reader handing out its bytes `step` at a time, as a socket may.
struct Dribble<'a> {
    data: &'a [u8],
    step: usize,
}

impl Read for Dribble<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.step.min(buf.len()).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

#[test]
fn a_response_in_pieces_is_fed_to_the_decoder_piece_by_piece() {
    let reply: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
          6\r\n{\"requ\r\n9\r\nests\": 7}\r\n0\r\n\r\n";
    // every split, down to one byte per read, decodes the same
    for step in [1, 2, 7, reply.len() / 2, reply.len()] {
        let v = read_stats_response(&mut Dribble { data: reply, step }).expect("stats");
        assert_eq!(v["requests"], 7, "step {step}");
    }
    // cut short at any point: no statistics
    for cut in [10, reply.len() - 3] {
        let mut r = Dribble {
            data: &reply[..cut],
            step: 3,
        };
        assert_eq!(read_stats_response(&mut r), None, "cut at {cut}");
    }
}

#[test]
fn other_servers_have_no_stats() {
    let (addr, h) = serve(b"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\n{}");
    assert_eq!(fetch_vodlab_stats(addr), None);
    h.join().unwrap();
    let (addr, h) = serve(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello");
    assert_eq!(fetch_vodlab_stats(addr), None, "not JSON");
    h.join().unwrap();
    let (addr, h) = serve(b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n{\"a\": 1}");
    assert_eq!(fetch_vodlab_stats(addr), None, "cut short");
    h.join().unwrap();
}

#[test]
fn a_compressed_workload_has_its_times_down_and_rates_up() {
    use vodlab_client::core::link::LinkSpec;
    use vodlab_client::load::Shard;
    let script = vodlab_workload::script::parse_script(
        "#@session id=1 bitrate=419000 request_s=40\n/a timeout=10\n/b pacing=10\n",
    )
    .unwrap();
    let mut w = LoadedWorkload {
        shards: vec![Shard {
            file: "s.vsl".into(),
            sessions: script.sessions.clone(),
            streamed: Vec::new(),
        }],
        ..Default::default()
    };
    w.classes.insert(
        "dsl".into(),
        LinkSpec {
            down_bps: 3.5e6,
            up_bps: 1e6,
            delay: Duration::from_millis(50),
        },
    );
    let tc = TimeCompression::new(10.0).unwrap();
    let mut c = w.clone();
    compress_workload(&mut c, tc);
    assert_eq!(c.shards[0].sessions[0], tc.session(&script.sessions[0]));
    let l = &c.classes["dsl"];
    assert_eq!((l.down_bps, l.up_bps), (3.5e7, 1e7));
    assert_eq!(l.delay, Duration::from_millis(5));
    let mut same = w.clone();
    compress_workload(&mut same, TimeCompression::NONE);
    assert_eq!(same.shards[0].sessions, w.shards[0].sessions);
    // spread points would compress twice (children load the workload)
    let s = PointSettings {
        client_processes: 2,
        client_exe: Some("/bin/true".into()),
        time_compression: tc,
        ..PointSettings::default()
    };
    let e = s.validate().unwrap_err().to_string();
    assert!(e.contains("--time-compression"), "{e}");
}

#[test]
fn an_interrupter_is_shared_by_its_clones() {
    let i = Interrupter::new();
    let j = i.clone();
    let rx = i.subscribe();
    assert!(!j.is_interrupted() && !*rx.borrow());
    i.interrupt();
    assert!(j.is_interrupted());
    assert!(*rx.borrow());
    assert!(*j.subscribe().borrow(), "a later run sees it too");
}
