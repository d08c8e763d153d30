use std::time::{Duration, Instant};

use super::*;
use crate::core::link::datagrams::{is_lost, losses};

fn spec(loss: f64, delay_ms: u64, seed: u64) -> DirectionSpec {
    DirectionSpec {
        rate_bps: 0.0,
        delay: Duration::from_millis(delay_ms),
        jitter: Duration::ZERO,
        loss,
        queue_bytes: 1 << 20,
        seed,
    }
}

/// A wrapped socket on loopback and a plain peer socket.
fn pair(up: DirectionSpec, down: DirectionSpec) -> (LinkSocket, tokio::net::UdpSocket) {
    let runtime = quinn::TokioRuntime;
    let inner = runtime
        .wrap_udp_socket(std::net::UdpSocket::bind("127.0.0.1:0").unwrap())
        .unwrap();
    let link = LinkSocket::wrap(inner, up, down);
    let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    peer.set_nonblocking(true).unwrap();
    (link, tokio::net::UdpSocket::from_std(peer).unwrap())
}

/// Datagram `i`: 100 bytes, its index in the first four.
fn datagram(i: u32) -> Vec<u8> {
    let mut d = vec![(i % 251) as u8; 100];
    d[..4].copy_from_slice(&i.to_be_bytes());
    d
}

#[tokio::test]
async fn sends_lose_the_seeded_datagrams_and_delay_the_rest() {
    let n = 2_000u32;
    let (link, peer) = pair(spec(0.05, 30, 11), spec(0.0, 0, 0));
    let to = peer.local_addr().unwrap();
    let want: Vec<u32> = (0..n).filter(|&i| !is_lost(11, i.into(), 0.05)).collect();
    let mut got = Vec::new();
    let mut buf = [0u8; 2048];
    // in batches of 50, each read before the next is sent (the peer's
    // socket buffer holds a batch, not 2,000)
    for batch in 0..n / 50 {
        let t0 = Instant::now();
        for i in batch * 50..(batch + 1) * 50 {
            let d = datagram(i);
            link.try_send(&Transmit {
                destination: to,
                ecn: None,
                contents: &d,
                segment_size: None,
                src_ip: None,
            })
            .unwrap();
        }
        let upto = want.iter().filter(|&&i| i < (batch + 1) * 50).count();
        while got.len() < upto {
            let r = tokio::time::timeout(Duration::from_secs(5), peer.recv(&mut buf)).await;
            let len = r.expect("every passed datagram arrives").unwrap();
            // none arrives before the one-way delay
            assert!(
                t0.elapsed() >= Duration::from_millis(30),
                "{:?}",
                t0.elapsed()
            );
            assert_eq!(len, 100);
            let i = u32::from_be_bytes(buf[..4].try_into().unwrap());
            assert_eq!(buf[..len], datagram(i)[..]);
            got.push(i);
        }
    }
    assert_eq!(got, want, "the seeded survivors, in order");
    let c = link.counts();
    assert_eq!(c.up.lost_datagrams, losses(11, n.into(), 0.05));
    assert_eq!(c.up.passed_datagrams, want.len() as u64);
    assert_eq!(c.up.passed_bytes, 100 * want.len() as u64);
    assert_eq!(c.down, DirectionCounts::default());
    // nothing more is to come: no datagram waits in the link
    assert!(link.shared.lock().outbox.is_empty());
}

#[tokio::test]
async fn receives_lose_the_seeded_datagrams_and_wait_for_their_time() {
    let n = 2_000u32;
    let (link, peer) = pair(spec(0.0, 0, 0), spec(0.05, 40, 12));
    let at = link.local_addr().unwrap();
    let want: Vec<u32> = (0..n).filter(|&i| !is_lost(12, i.into(), 0.05)).collect();
    let mut got = Vec::new();
    let mut bufs = vec![vec![0u8; 2048]; 4];
    // in batches of 50, each handed over before the next is sent
    for batch in 0..n / 50 {
        let t0 = Instant::now();
        for i in batch * 50..(batch + 1) * 50 {
            peer.send_to(&datagram(i), at).await.unwrap();
        }
        let upto = want.iter().filter(|&&i| i < (batch + 1) * 50).count();
        while got.len() < upto {
            let mut meta = [RecvMeta::default(); 4];
            let mut io: Vec<IoSliceMut<'_>> = bufs.iter_mut().map(|b| IoSliceMut::new(b)).collect();
            let k = tokio::time::timeout(
                Duration::from_secs(5),
                std::future::poll_fn(|cx| link.poll_recv(cx, &mut io, &mut meta)),
            )
            .await
            .expect("every passed datagram is handed over")
            .unwrap();
            // none is handed over before the one-way delay
            assert!(
                t0.elapsed() >= Duration::from_millis(40),
                "{:?}",
                t0.elapsed()
            );
            drop(io);
            for (b, m) in bufs.iter().zip(&meta).take(k) {
                assert_eq!(m.len, 100);
                assert_eq!(m.addr, peer.local_addr().unwrap());
                let i = u32::from_be_bytes(b[..4].try_into().unwrap());
                assert_eq!(b[..100], datagram(i)[..]);
                got.push(i);
            }
        }
    }
    assert_eq!(got, want, "the seeded survivors, in order");
    let c = link.counts();
    assert_eq!(c.down.lost_datagrams, losses(12, n.into(), 0.05));
    assert_eq!(c.down.offered(), u64::from(n));
    assert_eq!(c.up, DirectionCounts::default());
    assert!(link.shared.lock().inbox.is_empty());
}
