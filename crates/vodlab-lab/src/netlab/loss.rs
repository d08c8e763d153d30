//! Random loss in the lab's kernel: this kernel has no `netem` and no
//! `act_gact` (tc's `action gact drop random` fails with "Failed to load
//! TC action module"), but it has `cls_bpf` and `clsact`. A classic-BPF
//! program in direct-action mode on a device's egress hook drops a packet
//! when the kernel's random number (`ld rand`, `SKF_AD_RANDOM`) is below
//! `p × 2^32`, and lets the rest continue to the device's root qdisc (the
//! `htb` rates, when shaped). Every packet counts: TCP and UDP alike, ARP
//! too. The `clsact` qdisc counts what it saw and dropped
//! (`tc -s qdisc show dev DEV`: `Sent ... pkt (dropped N ...)`).
//!
//! The program runs once per socket buffer: a TCP sender's GSO buffer
//! of up to 64 KiB would be dropped whole (measured: 16 drops in 3,137
//! segments at 10 %), so the lab makes the senders on a lossy link send
//! one segment per buffer (`gso_max_segs 1` on the server's eth0 for
//! `--loss-down`, on the client's for `--loss-up`).

use std::fmt;
use std::str::FromStr;

use super::{cmd, Cmd};

/// A loss probability in parts per million, above 0 and at most 50 %.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Loss(pub u32);

impl Loss {
    /// The probability.
    pub fn probability(self) -> f64 {
        f64::from(self.0) / 1e6
    }

    /// The drop threshold on the kernel's 32-bit random number.
    pub fn threshold(self) -> u32 {
        ((u64::from(self.0) << 32) / 1_000_000) as u32
    }
}

impl FromStr for Loss {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        let pct: f64 = t
            .strip_suffix('%')
            .unwrap_or(t)
            .trim()
            .parse()
            .map_err(|_| format!("`{t}`: a loss is a percentage, e.g. 2 or 0.5%"))?;
        if !(pct > 0.0 && pct <= 50.0) {
            return Err(format!("`{t}`: a loss must be above 0 and at most 50 (%)"));
        }
        Ok(Loss((pct * 1e4).round().max(1.0) as u32))
    }
}

impl fmt::Display for Loss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}%", f64::from(self.0) / 1e4)
    }
}

/// The classic-BPF program (tc's `bytecode` syntax): `ld rand; jge
/// #threshold, pass, drop; drop: ret TC_ACT_SHOT (2); pass: ret
/// TC_ACT_UNSPEC (-1: on to the root qdisc)`.
pub fn bytecode(loss: Loss) -> String {
    // SKF_AD_OFF (-0x1000) + SKF_AD_RANDOM (56), as an unsigned k
    const LD_RAND: u32 = (0x1_0000_0000u64 - 0x1000 + 56) as u32;
    format!(
        "4,32 0 0 {LD_RAND},53 1 0 {},6 0 0 2,6 0 0 4294967295",
        loss.threshold()
    )
}

/// The commands that drop `loss` of what `dev` in `ns` sends. They are
/// run through `tc -batch` ([`super::flow::batches`]), whose parser takes
/// the quoted program as one argument.
pub fn drop_random(ns: &str, dev: &str, loss: Loss) -> Vec<Cmd> {
    vec![
        cmd(&["tc", "-n", ns, "qdisc", "add", "dev", dev, "clsact"]),
        cmd(&[
            "tc",
            "-n",
            ns,
            "filter",
            "add",
            "dev",
            dev,
            "egress",
            "prio",
            "1",
            "bpf",
            "da",
            "bytecode",
            &format!("\"{}\"", bytecode(loss)),
        ]),
    ]
}

/// The `clsact` counts in `tc -s qdisc show dev DEV`'s output: (packets
/// seen, packets dropped); `None` without a `clsact` qdisc.
pub fn clsact_counts(tc_output: &str) -> Option<(u64, u64)> {
    let mut lines = tc_output.lines();
    lines.find(|l| l.starts_with("qdisc clsact"))?;
    // " Sent 103074 bytes 1053 pkt (dropped 47, overlimits 0 requeues 0)"
    let l = lines.next()?;
    let w: Vec<&str> = l.split_whitespace().collect();
    let pkt = w.iter().position(|x| *x == "pkt")?;
    let sent = w.get(pkt - 1)?.parse().ok()?;
    let dropped = w.get(pkt + 2)?.trim_end_matches(',').parse().ok()?;
    Some((sent, dropped))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn losses_parse_as_percentages() {
        assert_eq!("2".parse::<Loss>(), Ok(Loss(20_000)));
        assert_eq!("0.5%".parse::<Loss>(), Ok(Loss(5_000)));
        assert_eq!(" 50 % ".parse::<Loss>(), Ok(Loss(500_000)));
        for bad in ["", "0", "-1", "51", "x", "nan", "2 pct"] {
            assert!(bad.parse::<Loss>().is_err(), "{bad}");
        }
        assert_eq!(Loss(5_000).to_string(), "0.5%");
        // 10 %: a tenth of 2^32
        assert_eq!(Loss(100_000).threshold(), 429_496_729);
        assert_eq!(Loss(500_000).threshold(), 1 << 31);
    }

    #[test]
    fn the_program_drops_below_the_threshold_and_passes_on() {
        assert_eq!(
            bytecode(Loss(100_000)),
            "4,32 0 0 4294963256,53 1 0 429496729,6 0 0 2,6 0 0 4294967295"
        );
        let c = drop_random("vl-x-hub", "c0", Loss(20_000));
        assert_eq!(c[0].join(" "), "tc -n vl-x-hub qdisc add dev c0 clsact");
        assert!(c[1]
            .join(" ")
            .starts_with("tc -n vl-x-hub filter add dev c0 egress prio 1 bpf da bytecode \"4,"));
    }

    #[test]
    fn clsact_counts_are_read_from_tc() {
        let out = "qdisc noqueue 0: root refcnt 2 \n Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) \n backlog 0b 0p requeues 0\nqdisc clsact ffff: parent ffff:fff1 \n Sent 103074 bytes 1053 pkt (dropped 47, overlimits 0 requeues 0) \n backlog 0b 0p requeues 0\n";
        assert_eq!(clsact_counts(out), Some((1053, 47)));
        assert_eq!(
            clsact_counts(
                "qdisc noqueue 0: root\n Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0)\n"
            ),
            None
        );
    }
}
