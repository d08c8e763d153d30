//! Who holds a port: a server we start must be the only listener on its
//! address. A loopback port answers a connect whoever listens on it, so a
//! readiness probe alone would take another process's server (a second
//! `vodlab compare` on the same `--port`, or a user's service) for ours
//! and measure it; with `SO_REUSEPORT` on both sides the kernel would even
//! split the connections between the two. Linux only: `/proc/net/tcp{,6}`
//! name each listening socket's inode, `/proc/PID/fd` who holds it.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;

/// An IPv6 address as `/proc/net/{tcp,udp}6` write it: four 32-bit words,
/// each in host order.
pub(super) fn proc_net_v6(ip: &std::net::Ipv6Addr) -> String {
    ip.octets()
        .chunks(4)
        .map(|w| format!("{:08X}", u32::from_le_bytes([w[0], w[1], w[2], w[3]])))
        .collect()
}

/// The inodes of the TCP sockets listening where a connect to `addr`
/// would land: `addr` itself, the unspecified address of its family, and
/// over IPv6 the unspecified or v4-mapped form of an IPv4 `addr`. `None`
/// when `/proc/net/tcp` cannot be read.
pub(super) fn tcp_listeners(addr: SocketAddr) -> Option<HashSet<u64>> {
    let port = format!("{:04X}", addr.port());
    let mut wanted = Vec::new();
    match addr {
        SocketAddr::V4(a) => {
            let v4 = format!("{:08X}", u32::from(*a.ip()).swap_bytes());
            wanted.push(("/proc/net/tcp", v4.clone()));
            wanted.push(("/proc/net/tcp", "00000000".to_string()));
            // ::ffff:a.b.c.d as /proc/net/tcp6 writes it (four host-order words)
            wanted.push(("/proc/net/tcp6", format!("0000000000000000FFFF0000{v4}")));
            wanted.push(("/proc/net/tcp6", "0".repeat(32)));
        }
        SocketAddr::V6(a) => {
            wanted.push(("/proc/net/tcp6", proc_net_v6(a.ip())));
            wanted.push(("/proc/net/tcp6", "0".repeat(32)));
        }
    }
    let mut read_any = false;
    let mut inodes = HashSet::new();
    for file in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        read_any = true;
        for l in text.lines().skip(1) {
            let f: Vec<&str> = l.split_whitespace().collect();
            // sl local_address rem_address st ... inode (field 9); 0A = LISTEN
            let (Some(local), Some(&"0A"), Some(inode)) = (f.get(1), f.get(3), f.get(9)) else {
                continue;
            };
            let Some((ip, p)) = local.split_once(':') else {
                continue;
            };
            if p == port && wanted.iter().any(|(w, h)| *w == file && h == ip) {
                if let Ok(i) = inode.parse() {
                    inodes.insert(i);
                }
            }
        }
    }
    read_any.then_some(inodes)
}

/// `pid` and every process descended from it (`/proc/*/stat`).
fn process_tree(pid: u32) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(p) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
                continue;
            };
            // "pid (comm) state ppid ...": comm may hold spaces and parentheses
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|s| s.parse::<u32>().ok());
            if let Some(pp) = ppid {
                children.entry(pp).or_default().push(p);
            }
        }
    }
    let mut tree = vec![pid];
    let mut i = 0;
    while i < tree.len() {
        if let Some(c) = children.get(&tree[i]) {
            tree.extend(c);
        }
        i += 1;
    }
    tree
}

/// The socket inodes the processes hold (`/proc/PID/fd`), and whether the
/// first process's descriptors could be read at all.
fn socket_inodes(pids: &[u32]) -> (HashSet<u64>, bool) {
    let mut held = HashSet::new();
    let mut readable = false;
    for (n, p) in pids.iter().enumerate() {
        let Ok(dir) = std::fs::read_dir(format!("/proc/{p}/fd")) else {
            continue;
        };
        if n == 0 {
            readable = true;
        }
        for e in dir.flatten() {
            if let Ok(t) = std::fs::read_link(e.path()) {
                let t = t.to_string_lossy();
                if let Some(i) = t
                    .strip_prefix("socket:[")
                    .and_then(|s| s.strip_suffix(']'))
                    .and_then(|s| s.parse().ok())
                {
                    held.insert(i);
                }
            }
        }
    }
    (held, readable)
}

/// Whether some process outside `pid`'s tree listens where a connect to
/// `addr` lands: `Some(true)` names a stranger, `Some(false)` says every
/// listener there is `pid`'s or its descendants', `None` that this could
/// not be told (no `/proc`, or `pid`'s descriptors unreadable).
pub(super) fn stranger_listens(addr: SocketAddr, pid: u32) -> Option<bool> {
    let listeners = tcp_listeners(addr)?;
    let (held, readable) = socket_inodes(&process_tree(pid));
    if !readable {
        return None;
    }
    Some(listeners.iter().any(|i| !held.contains(i)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::process::Command;

    #[test]
    fn our_own_listener_is_ours_and_a_strangers_to_a_child() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let inodes = tcp_listeners(addr).expect("/proc/net/tcp");
        assert_eq!(inodes.len(), 1, "one listener on {addr}");
        // this process holds it: no stranger
        assert_eq!(stranger_listens(addr, std::process::id()), Some(false));
        // to a child that holds nothing, this process is a stranger
        let mut child = Command::new("sleep").arg("5").spawn().unwrap();
        let seen = stranger_listens(addr, child.id());
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(seen, Some(true));
        // nobody listens on a port just closed
        drop(l);
        assert_eq!(tcp_listeners(addr).map(|s| s.len()), Some(0));
    }

    #[test]
    fn the_tree_holds_the_children() {
        let mut child = Command::new("sleep").arg("5").spawn().unwrap();
        let tree = process_tree(std::process::id());
        let _ = child.kill();
        let _ = child.wait();
        assert!(tree.contains(&child.id()), "{tree:?} lacks {}", child.id());
    }
}
