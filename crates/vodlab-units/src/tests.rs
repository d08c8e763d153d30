use super::*;
use proptest::prelude::*;

const KI: u64 = 1 << 10;
const MI: u64 = 1 << 20;
const GI: u64 = 1 << 30;

#[test]
fn sizes_binary_without_b_si_with_b() {
    for (s, n) in [
        ("4096", 4096),
        ("4M", 4 * MI),
        ("4MiB", 4 * MI),
        ("4Mi", 4 * MI),
        ("4m", 4 * MI),
        ("4MB", 4_000_000),
        ("1.5G", 3 * GI / 2),
        ("1.5g", 3 * GI / 2),
        ("256k", 256 * KI),
        ("256K", 256 * KI),
        ("256KiB", 256 * KI),
        ("256kB", 256_000),
        ("256KB", 256_000),
        ("2T", 2 << 40),
        ("1TB", 1_000_000_000_000),
        ("7MB", 7_000_000),
        ("1e6", 1_000_000),
        ("0.5k", 512),
        (".5k", 512),
        ("4 M", 4 * MI),
        (" 8K ", 8 * KI),
        ("0", 0),
        ("12B", 12),
        ("18446744073709551615", u64::MAX),
        ("16777215T", 16_777_215 << 40),
    ] {
        assert_eq!(parse_size(s), Ok(n), "{s}");
    }
}

#[test]
fn sizes_refused_name_the_input_and_show_the_grammar() {
    for s in [
        "", "4X", "M", "-1", "+1", "4Mb", "4mbit", "4MiBs", "4 M B", "lots", "1..2", "4KiBB",
    ] {
        let e = parse_size(s).unwrap_err();
        let m = e.to_string();
        assert!(m.starts_with(&format!("`{}`", s.trim())), "{m}");
        assert!(m.contains("4M = 4MiB"), "{m}");
    }
    assert!(parse_size("4Mb").unwrap_err().to_string().contains("bits"));
    assert!(parse_size("7XB")
        .unwrap_err()
        .to_string()
        .contains("unit \"XB\""));
    assert_eq!(
        parse_size("16777216T"),
        Err(UnitError::TooLarge {
            input: "16777216T".into(),
            what: "size"
        })
    );
    assert!(parse_size("1e30").is_err());
    assert_eq!(
        parse_size("4X").unwrap_err().to_string(),
        "`4X`: not a size (unknown unit \"X\"); sizes are a number with an optional unit: 4096 (bytes), \
256k = 256K = 256KiB = 256x1024, 4M = 4MiB = 4x2^20, 1.5G, 2T; with a B the unit is SI: \
256kB = 256000, 4MB = 4x10^6 bytes"
    );
}

#[test]
fn rates_bits_si_bytes_as_sizes() {
    for (s, bits) in [
        ("400kbit", 400_000),
        ("400Kbit", 400_000),
        ("3.5Mbit", 3_500_000),
        ("3.5mbit", 3_500_000),
        ("1Gbit", 1_000_000_000),
        ("1gbit", 1_000_000_000),
        ("1Gbit/s", 1_000_000_000),
        ("10.46mbit", 10_460_000),
        ("12bit", 12),
        ("10MB/s", 80_000_000),
        ("10MiB/s", 80 * MI),
        ("10M", 80 * MI),
        ("50M", 400 * MI),
        ("1.5M", 12 * MI),
        ("50000", 400_000),
        ("50000/s", 400_000),
        ("0", 0),
    ] {
        assert_eq!(parse_rate(s).map(Rate::bits_per_s), Ok(bits), "{s}");
    }
    assert_eq!(parse_rate("400kbit").unwrap().bytes_per_s(), 50_000);
    assert_eq!(parse_rate("50M").unwrap().bytes_per_s(), 50 * MI);
}

#[test]
fn bps_is_refused_as_ambiguous_with_both_spellings() {
    let e = parse_rate("55mbps").unwrap_err().to_string();
    assert!(e.contains("55mbit") && e.contains("55MB/s"), "{e}");
    let e = parse_rate("400kbps").unwrap_err().to_string();
    assert!(e.contains("400kbit") && e.contains("400kB/s"), "{e}");
    assert!(matches!(
        parse_rate("8bps"),
        Err(UnitError::AmbiguousBps { .. })
    ));
    for s in [
        "",
        "fast",
        "1Xbit",
        "4Mb",
        "1kibit",
        "-1bit",
        "10 m bit",
        "1Gbit/s/s",
    ] {
        let e = parse_rate(s).unwrap_err().to_string();
        assert!(e.contains("3.5Mbit"), "{s}: {e}");
    }
    assert!(parse_rate("4Mb").unwrap_err().to_string().contains("`bit`"));
}

#[test]
fn durations() {
    for (s, d) in [
        ("500ms", Duration::from_millis(500)),
        ("30s", Duration::from_secs(30)),
        ("2m", Duration::from_secs(120)),
        ("2min", Duration::from_secs(120)),
        ("1h", Duration::from_secs(3600)),
        ("1.5s", Duration::from_millis(1500)),
        ("0.1s", Duration::from_millis(100)),
        ("30", Duration::from_secs(30)),
        ("2.5", Duration::from_millis(2500)),
        ("250us", Duration::from_micros(250)),
        ("250µs", Duration::from_micros(250)),
        ("7ns", Duration::from_nanos(7)),
        ("0", Duration::ZERO),
    ] {
        assert_eq!(parse_duration(s), Ok(d), "{s}");
    }
    assert_eq!(
        parse_duration_bare("250", Bare::Micros),
        Ok(Duration::from_micros(250))
    );
    assert_eq!(
        parse_duration_bare("100", Bare::Millis),
        Ok(Duration::from_millis(100))
    );
    assert_eq!(
        parse_duration_bare("1s", Bare::Millis),
        Ok(Duration::from_secs(1))
    );
    assert_eq!(parse_seconds("500ms"), Ok(0.5));
    assert_eq!(parse_seconds("60"), Ok(60.0));
    assert_eq!(parse_millis("250"), Ok(250));
    assert_eq!(parse_millis("1.5s"), Ok(1500));
    assert_eq!(parse_micros("250"), Ok(250));
    assert_eq!(parse_micros("1ms"), Ok(1000));
    let e = parse_duration_bare("5", Bare::Refused)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("`5`: not a duration") && !e.contains("bare"),
        "{e}"
    );
    for s in ["", "-1", "1d", "5 sec", "1S", "fast", "1M"] {
        let e = parse_duration(s).unwrap_err().to_string();
        assert!(
            e.contains("500ms") && e.contains("a bare number is seconds"),
            "{s}: {e}"
        );
    }
    assert!(matches!(
        parse_duration("1e12h"),
        Err(UnitError::TooLarge { .. })
    ));
}

#[test]
fn formats_pick_the_largest_exact_unit() {
    assert_eq!(format_size(4 * MI), "4M");
    assert_eq!(format_size(256 * KI), "256K");
    assert_eq!(format_size(3 * GI / 2), "1536M");
    assert_eq!(format_size(4_000_000), "4000000");
    assert_eq!(format_size(0), "0");
    assert_eq!(Rate::from_bits_per_s(1_000_000_000).to_string(), "1Gbit");
    assert_eq!(Rate::from_bits_per_s(2_500_000).to_string(), "2500kbit");
    assert_eq!(Rate::from_bits_per_s(0).to_string(), "0bit");
    assert_eq!(format_duration(Duration::from_secs(5400)), "90m");
    assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
    assert_eq!(format_duration(Duration::ZERO), "0ns");
}

proptest! {
    #[test]
    fn size_round_trip(n in any::<u64>()) {
        prop_assert_eq!(parse_size(&format_size(n)), Ok(n));
        prop_assert_eq!(parse_size(&n.to_string()), Ok(n));
    }

    #[test]
    fn size_units_multiply(n in 0u64..1_000_000, p in 0usize..5, si in any::<bool>()) {
        let units = ["", "K", "M", "G", "T"];
        let s = if si && p > 0 { format!("{n}{}B", units[p]) } else { format!("{n}{}", units[p]) };
        let base: u64 = if si { 1000 } else { 1024 };
        prop_assert_eq!(parse_size(&s), Ok(n * base.pow(p as u32)));
        if p > 0 && !si {
            prop_assert_eq!(parse_size(&format!("{n}{}iB", units[p])), Ok(n * base.pow(p as u32)));
        }
    }

    #[test]
    fn rate_round_trip(bits in any::<u64>()) {
        let r = Rate::from_bits_per_s(bits);
        prop_assert_eq!(parse_rate(&r.to_string()), Ok(r));
    }

    #[test]
    fn bytes_rate_is_size_times_eight(n in 0u64..(1 << 40), slash in any::<bool>()) {
        let s = format_size(n);
        let s = if slash { format!("{s}/s") } else { s };
        prop_assert_eq!(parse_rate(&s).map(Rate::bits_per_s), Ok(n * 8));
    }

    #[test]
    fn duration_round_trip(ns in any::<u64>()) {
        let d = Duration::from_nanos(ns);
        prop_assert_eq!(parse_duration(&format_duration(d)), Ok(d));
    }

    #[test]
    fn decimal_durations_are_exact_to_the_nanosecond(ms in 0u64..1_000_000_000) {
        let s = format!("{}.{:03}s", ms / 1000, ms % 1000);
        prop_assert_eq!(parse_duration(&s), Ok(Duration::from_millis(ms)));
    }

    #[test]
    fn garbage_never_panics(s in "\\PC{0,12}") {
        let _ = parse_size(&s);
        let _ = parse_rate(&s);
        let _ = parse_duration(&s);
    }
}
