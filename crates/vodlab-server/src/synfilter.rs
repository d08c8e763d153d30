//! The per-address penalty moved into the kernel: a classic BPF socket
//! filter on the listening socket that drops the packets (SYNs, and the
//! ACKs of handshakes already begun) of the addresses [`crate::penalty`]
//! has banned, so a banned client's attempts never become connections —
//! no accept, no reset, nothing queued — and its kernel work is the
//! dropped packet's, charged where the packet is received. Without it a
//! banned address's every attempt costs the server an accept and a reset
//! (~35 µs each, measured in docs/benchmarks.md), which an attacker
//! reconnecting thousands of times a second turns into a tenth of a core.
//!
//! The program is rebuilt from the table whenever a ban begins or ends
//! and replaces the old one atomically (`SO_ATTACH_FILTER`); an empty
//! table detaches it. Addresses: IPv4 whole, IPv6 by its /64, as the
//! penalty keys them (an IPv4-mapped client of a dual-stack listener
//! arrives as an IPv4 packet). At most [`MAX_ADDRESSES`] are dropped in
//! the kernel; bans beyond them are still refused at accept. Accepted
//! sockets inherit the listener's filter at the handshake, so the accept
//! path detaches it from each one ([`detach`]) while a filter is in force,
//! and an established connection never runs it.
//!
//! [`program`] is pure (tested by interpreting it here, and by the kernel
//! in the server's tests); [`attach`] and [`detach`] are the syscalls.

use std::io;
use std::net::IpAddr;
use std::os::fd::RawFd;

/// Banned addresses dropped in the kernel at most (the program stays far
/// below the kernel's 4,096 instructions: 2 per IPv4 address, 5 per IPv6).
pub const MAX_ADDRESSES: usize = 512;

/// One classic BPF instruction (`struct sock_filter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    /// Opcode.
    pub code: u16,
    /// Jump offset if true.
    pub jt: u8,
    /// Jump offset if false.
    pub jf: u8,
    /// Constant.
    pub k: u32,
}

// the opcodes used (linux/filter.h)
const LD_B_ABS: u16 = 0x30; // BPF_LD | BPF_B | BPF_ABS
const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const RSH_K: u16 = 0x74; // BPF_ALU | BPF_RSH | BPF_K
const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const RET_K: u16 = 0x06; // BPF_RET | BPF_K
const JA: u16 = 0x05; // BPF_JMP | BPF_JA
/// `SKF_NET_OFF`: offsets from the network (IP) header.
const NET: u32 = (-0x100000i32) as u32;
const ACCEPT: u32 = u32::MAX;
const DROP: u32 = 0;

fn insn(code: u16, jt: u8, jf: u8, k: u32) -> Insn {
    Insn { code, jt, jf, k }
}

/// Pushes the test "A == `version`": true falls into the next `len`
/// instructions, false jumps over them (through a 32-bit relay jump where
/// `len` is beyond a conditional jump's 255).
fn enter_block(p: &mut Vec<Insn>, version: u32, len: usize) {
    match u8::try_from(len) {
        Ok(jf) => p.push(insn(JEQ_K, 0, jf, version)),
        Err(_) => {
            p.push(insn(JEQ_K, 1, 0, version));
            p.push(insn(JA, 0, 0, len as u32));
        }
    }
}

/// The filter dropping packets from `banned` (penalty keys; at most
/// [`MAX_ADDRESSES`] of them are used, the rest ignored). Within a block
/// every jump is an entry long; the jumps over a whole block go through a
/// relay where the block is longer than a conditional jump reaches.
pub fn program(banned: &[IpAddr]) -> Vec<Insn> {
    let used = &banned[..banned.len().min(MAX_ADDRESSES)];
    let v4: Vec<u32> = used
        .iter()
        .filter_map(|a| match a {
            IpAddr::V4(v) => Some(u32::from(*v)),
            IpAddr::V6(_) => None,
        })
        .collect();
    let v6: Vec<[u32; 2]> = used
        .iter()
        .filter_map(|a| match a {
            IpAddr::V6(v) => {
                let o = v.octets();
                let w = |i: usize| u32::from_be_bytes([o[i], o[i + 1], o[i + 2], o[i + 3]]);
                Some([w(0), w(4)])
            }
            IpAddr::V4(_) => None,
        })
        .collect();
    let mut p = vec![
        // the IP version, the high nibble of the first byte
        insn(LD_B_ABS, 0, 0, NET),
        insn(RSH_K, 0, 0, 4),
    ];
    // IPv4: load, two per entry, accept
    enter_block(&mut p, 4, 1 + 2 * v4.len() + 1);
    p.push(insn(LD_W_ABS, 0, 0, NET.wrapping_add(12))); // source address
    for a in &v4 {
        p.push(insn(JEQ_K, 0, 1, *a));
        p.push(insn(RET_K, 0, 0, DROP));
    }
    p.push(insn(RET_K, 0, 0, ACCEPT));
    // IPv6 (the A register still holds the version): five per entry, accept
    enter_block(&mut p, 6, 5 * v6.len() + 1);
    for [hi, lo] in &v6 {
        // the source's first 64 bits: bytes 8..16 of the IPv6 header
        p.push(insn(LD_W_ABS, 0, 0, NET.wrapping_add(8)));
        p.push(insn(JEQ_K, 0, 3, *hi));
        p.push(insn(LD_W_ABS, 0, 0, NET.wrapping_add(12)));
        p.push(insn(JEQ_K, 0, 1, *lo));
        p.push(insn(RET_K, 0, 0, DROP));
    }
    p.push(insn(RET_K, 0, 0, ACCEPT));
    // neither
    p.push(insn(RET_K, 0, 0, ACCEPT));
    p
}

/// Installs `prog` on socket `fd`, replacing any filter it had.
pub fn attach(fd: RawFd, prog: &[Insn]) -> io::Result<()> {
    let mut raw: Vec<libc::sock_filter> = prog
        .iter()
        .map(|i| libc::sock_filter {
            code: i.code,
            jt: i.jt,
            jf: i.jf,
            k: i.k,
        })
        .collect();
    let fprog = libc::sock_fprog {
        len: u16::try_from(raw.len()).map_err(|_| io::Error::other("filter too long"))?,
        filter: raw.as_mut_ptr(),
    };
    // SAFETY: a live sock_fprog pointing at `raw`, which outlives the call
    // (the kernel copies the program)
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ATTACH_FILTER,
            &fprog as *const libc::sock_fprog as *const libc::c_void,
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Removes socket `fd`'s filter; a socket without one is not an error.
pub fn detach(fd: RawFd) -> io::Result<()> {
    let zero: libc::c_int = 0;
    // SAFETY: a live int option value
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_DETACH_FILTER,
            &zero as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    let err = io::Error::last_os_error();
    match r {
        0 => Ok(()),
        _ if err.raw_os_error() == Some(libc::ENOENT) => Ok(()),
        _ => Err(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    /// Runs `prog` on an IP packet (`pkt` from its IP header on) the way
    /// the kernel's interpreter does for the instructions `program` uses.
    fn run(prog: &[Insn], pkt: &[u8]) -> u32 {
        let (mut a, mut pc) = (0u32, 0usize);
        loop {
            let i = prog[pc];
            let off = |k: u32| k.wrapping_sub(NET) as usize;
            pc += 1;
            match i.code {
                LD_B_ABS => a = u32::from(pkt[off(i.k)]),
                LD_W_ABS => {
                    let o = off(i.k);
                    a = u32::from_be_bytes([pkt[o], pkt[o + 1], pkt[o + 2], pkt[o + 3]]);
                }
                RSH_K => a >>= i.k,
                JEQ_K => pc += usize::from(if a == i.k { i.jt } else { i.jf }),
                JA => pc += i.k as usize,
                RET_K => return i.k,
                c => panic!("opcode {c:#x}"),
            }
        }
    }

    fn v4_packet(src: Ipv4Addr) -> Vec<u8> {
        let mut p = vec![0u8; 40];
        p[0] = 0x45;
        p[12..16].copy_from_slice(&src.octets());
        p
    }

    fn v6_packet(src: Ipv6Addr) -> Vec<u8> {
        let mut p = vec![0u8; 60];
        p[0] = 0x60;
        p[8..24].copy_from_slice(&src.octets());
        p
    }

    #[test]
    fn drops_exactly_the_banned_addresses() {
        let banned: Vec<IpAddr> = vec![
            "127.0.0.2".parse().unwrap(),
            "10.77.0.11".parse().unwrap(),
            crate::penalty::key("2001:db8:1:2::9".parse().unwrap()),
        ];
        let p = program(&banned);
        let drop4 = |a: &str| run(&p, &v4_packet(a.parse().unwrap())) == DROP;
        let drop6 = |a: &str| run(&p, &v6_packet(a.parse().unwrap())) == DROP;
        assert!(drop4("127.0.0.2") && drop4("10.77.0.11"));
        assert!(!drop4("127.0.0.1") && !drop4("10.77.0.10") && !drop4("2.0.0.127"));
        // the whole /64 of the banned IPv6 address, nothing beside it
        assert!(drop6("2001:db8:1:2::9") && drop6("2001:db8:1:2:ffff::1"));
        assert!(!drop6("2001:db8:1:3::9") && !drop6("::1"));
        // an empty table accepts everything
        let p = program(&[]);
        assert_eq!(run(&p, &v4_packet(Ipv4Addr::LOCALHOST)), ACCEPT);
        assert_eq!(run(&p, &v6_packet(Ipv6Addr::LOCALHOST)), ACCEPT);
    }

    #[test]
    fn long_tables_use_relays_and_stop_at_the_maximum() {
        let v4: Vec<IpAddr> = (0..300u32)
            .map(|i| IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i)))
            .collect();
        let v6: Vec<IpAddr> = (0..300u16)
            .map(|i| IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, i, 0, 0, 0, 0, 0)))
            .collect();
        let all: Vec<IpAddr> = v4.iter().chain(&v6).copied().collect();
        let p = program(&all);
        assert!(p.len() < 4096, "{} instructions", p.len());
        // the first MAX_ADDRESSES are dropped: all 300 IPv4, 212 IPv6
        for a in &v4 {
            let IpAddr::V4(a) = a else { unreachable!() };
            assert_eq!(run(&p, &v4_packet(*a)), DROP, "{a}");
        }
        for (i, a) in v6.iter().enumerate() {
            let IpAddr::V6(a) = a else { unreachable!() };
            let want = if i < MAX_ADDRESSES - 300 {
                DROP
            } else {
                ACCEPT
            };
            assert_eq!(run(&p, &v6_packet(*a)), want, "{a}");
        }
        assert_eq!(run(&p, &v4_packet(Ipv4Addr::new(11, 0, 0, 1))), ACCEPT);
    }

    #[test]
    fn the_kernel_drops_a_banned_address_syn_and_serves_others() {
        use std::os::fd::AsRawFd;
        use std::time::Duration;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        attach(l.as_raw_fd(), &program(&["127.0.0.2".parse().unwrap()])).unwrap();
        let connect_from = |src: &str| {
            let s =
                socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
            s.bind(
                &format!("{src}:0")
                    .parse::<std::net::SocketAddr>()
                    .unwrap()
                    .into(),
            )
            .unwrap();
            s.connect_timeout(&addr.into(), Duration::from_millis(500))
        };
        assert!(connect_from("127.0.0.1").is_ok());
        let e = connect_from("127.0.0.2").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        // the accepted socket inherited the filter; detaching it is allowed
        let (c, _) = l.accept().unwrap();
        detach(c.as_raw_fd()).unwrap();
        detach(c.as_raw_fd()).unwrap(); // none left: still fine
                                        // the table emptied: the listener's filter removed, 127.0.0.2 served
        detach(l.as_raw_fd()).unwrap();
        assert!(connect_from("127.0.0.2").is_ok());
    }
}
