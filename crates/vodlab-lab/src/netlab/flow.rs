//! Per-connection shaping: every TCP connection of a client host gets its
//! own `htb` class at the host's rate, as if each viewer had an access
//! link of its own (what `vodlab run`'s in-process link emulation does per
//! session).
//!
//! The kernel here has `htb` and `u32` but no `flow` classifier (nor
//! `netem`), so a connection is told apart by its client-side port: the
//! client host's ephemeral ports are narrowed to [`PORT_BASE`] ..
//! `PORT_BASE + flows - 1` (`net.ipv4.ip_local_port_range` is per
//! namespace), and `u32` hash tables send each port to its own leaf class
//! `1:(100 + port - PORT_BASE)` (hex minors). With the default [`FLOWS`]
//! (256) one table of 256 buckets is keyed on the port's low byte; with
//! more (a multiple of 256, at most [`MAX_FLOWS`]) a first table keyed on
//! the port's high byte links to one such table per 256 ports, so a packet
//! takes two hash lookups whatever the host's size. Downstream (server
//! toward client) the key is the destination port, on the hub's port
//! toward the host; upstream the source port, on the host's `eth0`.
//! Connections to one server address and port have distinct local ports,
//! so distinct classes; a host can have at most `flows` connections at
//! once, and one more fails to connect (`EADDRNOTAVAIL`). Packets that are
//! not TCP (ARP, ICMP) are not classified and pass unshaped.
//!
//! GSO is limited to one segment on the sending ends (`gso_max_size`,
//! `gso_max_segs`): htb charges a packet whole, and a 64 KiB GSO packet at
//! 1 Mbit/s would be a 0.5 s burst.

use super::{cmd, Cmd, Rate};

/// Connections shaped at once per client host by default (buckets of the
/// one hash table).
pub const FLOWS: u16 = 256;
/// The most connections a client host may have shaped at once
/// (`--flows-per-host`): 64 tables of 256 ports, 40960-57343.
pub const MAX_FLOWS: u16 = 16384;
/// First ephemeral port of a client host under per-flow shaping (a
/// multiple of 256, so the port's low byte is its bucket).
pub const PORT_BASE: u16 = 40960;

/// Which direction a per-flow plan shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Server toward client: keyed on the destination port.
    Down,
    /// Client toward server: keyed on the source port.
    Up,
}

/// True when `flows` is a valid per-host connection count: a multiple of
/// 256 from 256 to [`MAX_FLOWS`].
pub fn valid_flows(flows: u16) -> bool {
    (FLOWS..=MAX_FLOWS).contains(&flows) && flows % 256 == 0
}

/// The `htb` tree shaping each of `flows` connections ([`valid_flows`])
/// through `dev` in `ns` to `rate`: a root qdisc whose unclassified packets
/// pass unshaped, `flows` leaf classes, and the `u32` hash filters that
/// pick a leaf by port.
pub fn per_flow(ns: &str, dev: &str, rate: Rate, dir: Direction, flows: u16) -> Vec<Cmd> {
    let r = rate.to_string();
    let tc = |rest: &[&str]| {
        let mut c = cmd(&["tc", "-n", ns]);
        c.extend(rest.iter().map(|s| s.to_string()));
        c
    };
    // htb without `default`: unclassified packets are sent at once
    let mut v = vec![tc(&[
        "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb",
    ])];
    for b in 0..flows {
        let id = format!("1:{:x}", 0x100 + u32::from(b));
        v.push(tc(&[
            "class", "add", "dev", dev, "parent", "1:", "classid", &id, "htb", "rate", &r, "ceil",
            &r,
        ]));
    }
    // word at offset 20 of an IPv4 packet without options: sport << 16 | dport
    let (low, high) = match dir {
        Direction::Down => ("0x000000ff", "0x0000ff00"),
        Direction::Up => ("0x00ff0000", "0xff000000"),
    };
    let f = Filters { ns, dev };
    if flows <= FLOWS {
        // one table keyed on the port's low byte, bucket b to leaf 1:(100 + b)
        v.push(f.table(2));
        v.push(f.root(low, 2));
        v.extend(f.leaves(2, 0, flows));
        return v;
    }
    // tables 3: .. (one per 256 ports, keyed on the low byte, bucket b of
    // table 3+t to leaf 1:(100 + 256 t + b)), and table 2: keyed on the high
    // byte, whose bucket PORT_BASE / 256 + t links to table 3+t; tables are
    // made before the filters that link to them
    let tables = flows / 256;
    v.extend((0..tables).map(|t| f.table(3 + t)));
    v.push(f.table(2));
    v.push(f.root(high, 2));
    for t in 0..tables {
        let bucket = format!("2:{:x}:", (PORT_BASE / 256 + t) & 0xff);
        v.push(f.link(&bucket, low, 3 + t));
        v.extend(f.leaves(3 + t, u32::from(t) * 256, 256));
    }
    v
}

/// The `u32` filter commands on the `htb` root `1:` of `dev` in `ns`.
struct Filters<'a> {
    ns: &'a str,
    dev: &'a str,
}

impl Filters<'_> {
    fn cmd(&self, rest: &[&str]) -> Cmd {
        let mut c = cmd(&[
            "tc", "-n", self.ns, "filter", "add", "dev", self.dev, "parent", "1:", "prio", "1",
        ]);
        c.extend(rest.iter().map(|s| s.to_string()));
        c
    }

    /// Hash table `handle:` of 256 buckets.
    fn table(&self, handle: u16) -> Cmd {
        let h = format!("{handle:x}:");
        self.cmd(&["handle", &h, "protocol", "ip", "u32", "divisor", "256"])
    }

    /// TCP packets hashed on `mask` of the ports' word into table `to:`.
    fn root(&self, mask: &str, to: u16) -> Cmd {
        let to = format!("{to:x}:");
        self.cmd(&[
            "protocol", "ip", "u32", "ht", "800::", "match", "ip", "protocol", "6", "0xff",
            "hashkey", "mask", mask, "at", "20", "link", &to,
        ])
    }

    /// Bucket `ht` hashes on `mask` of the ports' word into table `to:`.
    fn link(&self, ht: &str, mask: &str, to: u16) -> Cmd {
        let to = format!("{to:x}:");
        self.cmd(&[
            "protocol", "ip", "u32", "ht", ht, "match", "u32", "0", "0", "hashkey", "mask", mask,
            "at", "20", "link", &to,
        ])
    }

    /// Buckets 0..n of table `table:` to leaves `1:(100 + first + b)`.
    fn leaves(&self, table: u16, first: u32, n: u16) -> impl Iterator<Item = Cmd> + '_ {
        (0..n).map(move |b| {
            let ht = format!("{table:x}:{b:x}:");
            let id = format!("1:{:x}", 0x100 + first + u32::from(b));
            self.cmd(&[
                "protocol", "ip", "u32", "ht", &ht, "match", "u32", "0", "0", "flowid", &id,
            ])
        })
    }
}

/// Narrows client host `ns`'s ephemeral ports to the shaped range, and lets
/// it reuse a port in TIME-WAIT for a new connection (so closed sessions do
/// not use the range up).
pub fn port_range(ns: &str, flows: u16) -> Vec<Cmd> {
    let range = format!(
        "net.ipv4.ip_local_port_range={} {}",
        PORT_BASE,
        PORT_BASE + flows - 1
    );
    vec![
        cmd(&["ip", "netns", "exec", ns, "sysctl", "-qw", &range]),
        cmd(&[
            "ip",
            "netns",
            "exec",
            ns,
            "sysctl",
            "-qw",
            "net.ipv4.tcp_tw_reuse=1",
        ]),
    ]
}

/// One packet per segment from `eth0` in `ns` (no GSO bursts into htb).
pub fn no_gso(ns: &str) -> Cmd {
    cmd(&[
        "ip",
        "-n",
        ns,
        "link",
        "set",
        "eth0",
        "gso_max_size",
        "1500",
        "gso_max_segs",
        "1",
    ])
}

/// The plan's commands with runs of `tc -n NS ...` of one namespace made
/// into one `tc -n NS -batch -` each: the command and the lines it reads on
/// its standard input (`None` for a command run as it is). A per-flow host
/// is about 500 tc commands; one process per namespace instead of one per
/// command.
pub fn batches(plan: &[Cmd]) -> Vec<(Cmd, Option<String>)> {
    let mut out: Vec<(Cmd, Option<String>)> = Vec::new();
    for c in plan {
        let tc_ns = (c.len() > 3 && c[0] == "tc" && c[1] == "-n").then(|| c[2].clone());
        match (tc_ns, out.last_mut()) {
            (Some(ns), Some((head, Some(lines)))) if head[2] == ns => {
                lines.push_str(&c[3..].join(" "));
                lines.push('\n');
            }
            (Some(ns), _) => {
                let mut lines = c[3..].join(" ");
                lines.push('\n');
                out.push((cmd(&["tc", "-n", &ns, "-batch", "-"]), Some(lines)));
            }
            (None, _) => out.push((c.clone(), None)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_port_of_the_range_has_its_own_leaf_at_the_rate() {
        let plan = per_flow("vl-x-hub", "c0", Rate(3_500_000), Direction::Down, FLOWS);
        let lines: Vec<String> = plan.iter().map(|c| c.join(" ")).collect();
        let classes: Vec<&String> = lines.iter().filter(|l| l.contains(" class add ")).collect();
        assert_eq!(classes.len(), usize::from(FLOWS));
        for c in &classes {
            assert!(c.ends_with("htb rate 3500kbit ceil 3500kbit"), "{c}");
        }
        // the bucket of port p is p's low byte, and bucket b leads to leaf 1:(100+b)
        for port in [PORT_BASE, PORT_BASE + 1, PORT_BASE + FLOWS - 1] {
            let b = port & 0xff;
            let leaf = format!("1:{:x}", 0x100 + u32::from(b));
            assert!(lines.contains(&format!(
                "tc -n vl-x-hub class add dev c0 parent 1: classid {leaf} htb rate 3500kbit ceil 3500kbit"
            )));
            assert!(lines.contains(&format!(
                "tc -n vl-x-hub filter add dev c0 parent 1: prio 1 protocol ip u32 ht 2:{b:x}: match u32 0 0 flowid {leaf}"
            )));
        }
        assert_eq!(PORT_BASE % 256, 0);
        // downstream hashes the destination port, upstream the source port
        assert!(lines
            .iter()
            .any(|l| l.contains("hashkey mask 0x000000ff at 20 link 2:")));
        let up = per_flow("vl-x-c0", "eth0", Rate(1_000_000), Direction::Up, FLOWS);
        assert!(up.iter().any(|c| c
            .join(" ")
            .contains("hashkey mask 0x00ff0000 at 20 link 2:")));
        // no default class: what is not TCP passes unshaped
        assert_eq!(
            lines[0],
            "tc -n vl-x-hub qdisc add dev c0 root handle 1: htb"
        );
    }

    #[test]
    fn a_host_of_many_flows_has_a_leaf_per_port_behind_two_hashes() {
        let flows = 1024;
        assert!(valid_flows(flows) && valid_flows(MAX_FLOWS) && valid_flows(FLOWS));
        assert!(!valid_flows(300) && !valid_flows(0) && !valid_flows(MAX_FLOWS + 256));
        let plan = per_flow("vl-x-hub", "c0", Rate(2_000_000), Direction::Down, flows);
        let lines: Vec<String> = plan.iter().map(|c| c.join(" ")).collect();
        let pre = "tc -n vl-x-hub filter add dev c0 parent 1: prio 1";
        assert_eq!(
            lines.iter().filter(|l| l.contains(" class add ")).count(),
            usize::from(flows)
        );
        // the tables exist before any filter links to them
        let made = |h: &str| {
            lines
                .iter()
                .position(|l| *l == format!("{pre} handle {h} protocol ip u32 divisor 256"))
                .unwrap_or_else(|| panic!("no table {h}"))
        };
        let linked = |h: &str| {
            lines
                .iter()
                .position(|l| l.ends_with(&format!(" link {h}")))
                .unwrap_or_else(|| panic!("nothing links to {h}"))
        };
        for h in ["2:", "3:", "4:", "5:", "6:"] {
            assert!(made(h) < linked(h), "{h}");
        }
        // the root hashes the destination port's high byte
        assert!(lines.contains(&format!(
            "{pre} protocol ip u32 ht 800:: match ip protocol 6 0xff hashkey mask 0x0000ff00 at 20 link 2:"
        )));
        // follow ports through both tables: high byte, then low byte, to
        // leaf 1:(100 + port - PORT_BASE)
        for port in [
            PORT_BASE,
            PORT_BASE + 255,
            PORT_BASE + 256,
            PORT_BASE + flows - 1,
        ] {
            let (hi, lo) = (port >> 8, port & 0xff);
            let t = (port - PORT_BASE) / 256;
            let table = format!("{:x}:", 3 + t);
            assert!(lines.contains(&format!(
                "{pre} protocol ip u32 ht 2:{hi:x}: match u32 0 0 hashkey mask 0x000000ff at 20 link {table}"
            )));
            let leaf = format!("1:{:x}", 0x100 + u32::from(port - PORT_BASE));
            assert!(lines.contains(&format!(
                "{pre} protocol ip u32 ht {table}{lo:x}: match u32 0 0 flowid {leaf}"
            )));
            assert!(lines
                .iter()
                .any(|l| l.contains(&format!("classid {leaf} htb rate 2mbit"))));
        }
        // upstream: the source port's bytes
        let up = per_flow("vl-x-c0", "eth0", Rate(1_000_000), Direction::Up, flows);
        let up: Vec<String> = up.iter().map(|c| c.join(" ")).collect();
        assert!(up
            .iter()
            .any(|l| l.contains("hashkey mask 0xff000000 at 20 link 2:")));
        assert!(up
            .iter()
            .any(|l| l.contains("hashkey mask 0x00ff0000 at 20 link 3:")));
        assert_eq!(
            port_range("n", flows)[0].last().unwrap(),
            "net.ipv4.ip_local_port_range=40960 41983"
        );
    }

    #[test]
    fn the_port_range_is_the_buckets() {
        let p = port_range("vl-x-c1", FLOWS);
        assert_eq!(
            p[0].last().unwrap(),
            "net.ipv4.ip_local_port_range=40960 41215"
        );
        assert!(p.iter().all(|c| c[3] == "vl-x-c1"));
    }

    #[test]
    fn tc_runs_of_one_namespace_become_one_batch() {
        let plan = vec![
            cmd(&["ip", "netns", "add", "a"]),
            cmd(&["tc", "-n", "a", "qdisc", "add", "dev", "x"]),
            cmd(&["tc", "-n", "a", "class", "add", "dev", "x"]),
            cmd(&["tc", "-n", "b", "qdisc", "add", "dev", "y"]),
            cmd(&["ip", "link"]),
            cmd(&["tc", "-n", "b", "filter", "add"]),
        ];
        let b = batches(&plan);
        assert_eq!(b.len(), 5);
        assert_eq!(b[0], (plan[0].clone(), None));
        assert_eq!(b[1].0.join(" "), "tc -n a -batch -");
        assert_eq!(
            b[1].1.as_deref(),
            Some("qdisc add dev x\nclass add dev x\n")
        );
        assert_eq!(b[2].1.as_deref(), Some("qdisc add dev y\n"));
        assert_eq!(b[3], (plan[4].clone(), None));
        assert_eq!(b[4].1.as_deref(), Some("filter add\n"));
    }
}
