//! `vodlab lab --loss-down/--loss-up`: random loss in the kernel for every
//! protocol (a classic-BPF program on each client link's `clsact` egress
//! hook; this kernel has neither netem nor act_gact). Ground truth: the
//! datagrams a receiver in the lab got of those sent, against the drops
//! `tc -s` counts and the probability asked for; a TCP transfer through
//! the same links arrives whole while packets of it are dropped. Needs
//! root (CI runs as root); without it only the refusal is checked.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{require, vodlab};
use vodlab_lab::hwbox::is_root;
use vodlab_lab::netlab::{in_namespace, loss::clsact_counts};

/// The `clsact` counts (seen, dropped) of `dev` in `ns`.
fn drops(ns: &str, dev: &str) -> (u64, u64) {
    let o = Command::new("tc")
        .args(["-n", ns, "-s", "qdisc", "show", "dev", dev])
        .output()
        .expect("tc (iproute2)");
    let text = String::from_utf8_lossy(&o.stdout);
    clsact_counts(&text).unwrap_or_else(|| panic!("no clsact on {ns} {dev}: {text}"))
}

/// The number that ends a stream of datagrams ([`udp_through`]).
const END: u32 = u32::MAX;

/// Sends `n` numbered datagrams from namespace `from` to `to` (bound in
/// namespace `at`), paced at 20 per ms (under 40 Mbit/s: neither the
/// lab's 50 Mbit/s queue nor the receiver's buffer overflows), then an
/// end marker every 10 ms until the receiver has seen two (markers may be
/// lost too; a datagram sent before the first marker arrives before the
/// second, 10 ms later, whatever the kernel's reordering between CPUs);
/// the numbers received.
fn udp_through(from: &str, at: &str, to: SocketAddr, n: u32) -> Vec<u32> {
    let rx = in_namespace(at, move || UdpSocket::bind(to).unwrap()).unwrap();
    rx.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let (from, stop) = (from.to_string(), done.clone());
    let sender = std::thread::spawn(move || {
        in_namespace(&from, move || {
            let s = UdpSocket::bind("0.0.0.0:0").unwrap();
            let send = |i: u32| {
                let mut d = [0u8; 200];
                d[..4].copy_from_slice(&i.to_be_bytes());
                s.send_to(&d, to).unwrap();
            };
            for i in 0..n {
                send(i);
                if i % 20 == 19 {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            // the poll interval of a bounded wait for the receiver
            for _ in 0..1000 {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                send(END);
                std::thread::sleep(Duration::from_millis(10));
            }
            panic!("the receiver never saw two end markers");
        })
        .unwrap()
    });
    let (mut got, mut ends) = (Vec::new(), 0);
    let mut buf = [0u8; 512];
    while ends < 2 {
        let len = rx.recv(&mut buf).expect("a datagram within 10 s");
        assert_eq!(len, 200);
        match u32::from_be_bytes(buf[..4].try_into().unwrap()) {
            END => ends += 1,
            i => got.push(i),
        }
    }
    done.store(true, Ordering::Relaxed);
    sender.join().unwrap();
    got
}

/// Pings `addr` from namespace `ns` until one answer comes (at most 30
/// tries): the neighbours are resolved before anything is counted (an
/// ARP request lost to the lab's loss holds back every datagram behind it
/// for a second, and the neighbour queue drops most of them).
fn resolve(ns: &str, addr: &str) {
    let ping = require("ping", "iputils-ping");
    for _ in 0..30 {
        let o = Command::new("ip")
            .args(["netns", "exec", ns])
            .arg(&ping)
            .args(["-c", "1", "-W", "1", addr])
            .output()
            .unwrap();
        if o.status.success() {
            return;
        }
    }
    panic!("{addr} never answered a ping from {ns}");
}

/// Takes the lab `name` down when dropped (a failed assertion included).
struct Down(&'static str);

impl Drop for Down {
    fn drop(&mut self) {
        let _ = vodlab(&["lab", "down", "--name", self.0]);
    }
}

/// `dropped` of `n` is within 5 standard deviations of `p`.
fn about(dropped: u64, n: u64, p: f64) -> bool {
    let sigma = (n as f64 * p * (1.0 - p)).sqrt();
    (dropped as f64 - n as f64 * p).abs() < 5.0 * sigma
}

#[test]
fn lab_loss_drops_about_p_of_udp_and_tcp_both_ways() {
    if !is_root() {
        let o = vodlab(&["lab", "up", "--name", "tl0", "--loss-down", "1"]);
        assert_eq!(o.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&o.stderr).contains("needs root"));
        eprintln!("not root: checked only that vodlab lab refuses plainly");
        return;
    }
    // a bad loss is refused by name, before anything is built
    let o = vodlab(&["lab", "up", "--name", "tl1", "--loss-down", "60"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("at most 50"));
    let name = "tl1";
    let o = vodlab(&[
        "lab",
        "up",
        "--name",
        name,
        "--clients",
        "1",
        "--client-down",
        "50mbit",
        "--loss-down",
        "10",
        "--loss-up",
        "5",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let down = Down(name);
    let (hub, srv, cli) = (
        format!("vl-{name}-hub"),
        format!("vl-{name}-srv"),
        format!("vl-{name}-c0"),
    );
    resolve(&srv, "10.77.0.10");
    resolve(&cli, "10.77.0.1");
    let n = 5_000u32;
    // down: server -> client, dropped on the hub's port c0
    let before = drops(&hub, "c0");
    let got = udp_through(&srv, &cli, "10.77.0.10:9000".parse().unwrap(), n);
    let after = drops(&hub, "c0");
    let lost = u64::from(n) - got.len() as u64;
    let (seen, dropped) = (after.0 - before.0, after.1 - before.1);
    eprintln!("down: {lost} of {n} datagrams lost; tc: {dropped} dropped of {seen} seen");
    // tc's drops are the datagrams missing, plus end markers and the few
    // other packets on the link (ARP)
    assert!(
        dropped >= lost && dropped - lost <= seen - u64::from(n),
        "{lost} {dropped} {seen}"
    );
    assert!(about(lost, n.into(), 0.10), "down: {lost} of {n} at 10 %");
    // none twice, none made up: the program only drops (the order is the
    // kernel's: a sender moving between CPUs may reorder on a veth)
    let mut seen_once = got.clone();
    seen_once.sort_unstable();
    seen_once.dedup();
    assert_eq!(seen_once.len(), got.len());
    assert!(got.iter().all(|&i| i < n));
    // up: client -> server, dropped on the client's eth0
    let before = drops(&cli, "eth0");
    let got = udp_through(&cli, &srv, "10.77.0.1:9001".parse().unwrap(), n);
    let after = drops(&cli, "eth0");
    let lost = u64::from(n) - got.len() as u64;
    let (seen, dropped) = (after.0 - before.0, after.1 - before.1);
    eprintln!("up: {lost} of {n} datagrams lost; tc: {dropped} dropped of {seen} seen");
    assert!(
        dropped >= lost && dropped - lost <= seen - u64::from(n),
        "{lost} {dropped} {seen}"
    );
    assert!(about(lost, n.into(), 0.05), "up: {lost} of {n} at 5 %");
    // TCP: 4 MB from the server arrive whole while its segments are dropped
    let before = (drops(&hub, "c0"), drops(&cli, "eth0"));
    let listener = in_namespace(&srv, || TcpListener::bind("10.77.0.1:9002").unwrap()).unwrap();
    let body: Vec<u8> = (0..4_000_000u32).map(|i| ((i * 7) >> 3) as u8).collect();
    let want = body.clone();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.write_all(&body).unwrap();
    });
    let mut c = in_namespace(&cli, || TcpStream::connect("10.77.0.1:9002").unwrap()).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut got = Vec::new();
    c.read_to_end(&mut got).unwrap();
    server.join().unwrap();
    assert!(got == want, "the TCP transfer arrived whole");
    let after = (drops(&hub, "c0"), drops(&cli, "eth0"));
    let (seen_d, dropped_d) = (after.0 .0 - before.0 .0, after.0 .1 - before.0 .1);
    let (seen_u, dropped_u) = (after.1 .0 - before.1 .0, after.1 .1 - before.1 .1);
    eprintln!(
        "tcp: down {dropped_d} of {seen_d} segments dropped, up {dropped_u} of {seen_u} ACKs"
    );
    assert!(dropped_d > 0 && dropped_u > 0);
    assert!(about(dropped_d, seen_d, 0.10), "{dropped_d} of {seen_d}");
    assert!(about(dropped_u, seen_u, 0.05), "{dropped_u} of {seen_u}");
    drop(down);
    let left = Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&left.stdout).contains(&format!("vl-{name}-")),
        "the lab's namespaces are gone"
    );
}
