//! The content function's bytes, made with the CPU's vector units.
//!
//! [`vodlab_workload::content::fill`] is compiled for the baseline x86-64
//! (SSE2), where its SplitMix64 stream runs at about 7 GB/s on this VM. The
//! stream's 64-bit multiplies vectorize with AVX-512DQ (`vpmullq`) and, more
//! slowly, with AVX2, giving 30–40 and 13 GB/s. [`fill`] picks the widest
//! variant the CPU has at run time and produces exactly the bytes of
//! `content::fill`: the tests compare the two over random seeds, keys,
//! offsets and lengths, so a change to the content function that is not
//! made here too fails them.
//!
//! The formula is repeated here (not called) because a function of another
//! crate that is not `#[inline]` is not inlined into a
//! `#[target_feature]` function, so it would run at the baseline speed.

use vodlab_workload::content::BLOCK;

const HEADER: usize = vodlab_workload::content::HEADER;
const MAGIC: &[u8; 4] = b"VLB1";

#[inline(always)]
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Block `index` of a file, as `content::block` makes it.
#[inline(always)]
fn block(seed: u64, key: u64, index: u64, out: &mut [u8; BLOCK]) {
    let offset = index * BLOCK as u64;
    out[..4].copy_from_slice(MAGIC);
    out[4..12].copy_from_slice(&key.to_le_bytes());
    out[12..20].copy_from_slice(&offset.to_le_bytes());
    let mut st = seed ^ key.rotate_left(17) ^ index.wrapping_mul(0xd6e8_feb8_6659_fd93);
    let check = (splitmix(&mut st.clone()) as u32).to_le_bytes();
    out[20..24].copy_from_slice(&check);
    // the state is a counter (an induction variable), so each word is
    // independent of the others and the compiler vectorizes the loop
    for chunk in out[HEADER..].chunks_exact_mut(8) {
        chunk.copy_from_slice(&splitmix(&mut st).to_le_bytes());
    }
}

#[inline(always)]
fn fill_impl(seed: u64, key: u64, offset: u64, buf: &mut [u8]) {
    let mut scratch = [0u8; BLOCK];
    let mut pos = 0usize;
    while pos < buf.len() {
        let abs = offset + pos as u64;
        let index = abs / BLOCK as u64;
        let within = (abs % BLOCK as u64) as usize;
        let n = (BLOCK - within).min(buf.len() - pos);
        if within == 0 && n == BLOCK {
            let dst: &mut [u8; BLOCK] = (&mut buf[pos..pos + BLOCK]).try_into().expect("block");
            block(seed, key, index, dst);
        } else {
            block(seed, key, index, &mut scratch);
            buf[pos..pos + n].copy_from_slice(&scratch[within..within + n]);
        }
        pos += n;
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2")]
unsafe fn fill_avx512(seed: u64, key: u64, offset: u64, buf: &mut [u8]) {
    fill_impl(seed, key, offset, buf)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn fill_avx2(seed: u64, key: u64, offset: u64, buf: &mut [u8]) {
    fill_impl(seed, key, offset, buf)
}

/// The widest variant this CPU runs: `avx512`, `avx2` or `baseline`.
pub fn variant() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx512f")
            && std::is_x86_feature_detected!("avx512dq")
            && std::is_x86_feature_detected!("avx512vl")
        {
            return "avx512";
        }
        if std::is_x86_feature_detected!("avx2") {
            return "avx2";
        }
    }
    "baseline"
}

/// Fills `buf` with bytes `offset .. offset + buf.len()` of the file with
/// `key`, exactly as [`vodlab_workload::content::fill`] does: with the
/// widest [`variant`] in an optimized build; in a debug build (where this
/// crate is not optimized but `vodlab-workload` is, see the workspace's
/// `Cargo.toml`) with `content::fill` itself.
pub fn fill(seed: u64, key: u64, offset: u64, buf: &mut [u8]) {
    if cfg!(debug_assertions) {
        vodlab_workload::content::fill(seed, key, offset, buf);
    } else {
        fill_with(chosen(), seed, key, offset, buf);
    }
}

/// The variant [`fill`] uses: the widest this CPU runs, or the one named
/// by the environment variable `VODLAB_DISK_SYNTH` (`avx512`, `avx2`,
/// `baseline`; a benchmark's peer), read once. A debug build says
/// `content::fill`.
pub fn chosen() -> &'static str {
    if cfg!(debug_assertions) {
        return "content::fill";
    }
    static CHOSEN: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();
    CHOSEN.get_or_init(|| match std::env::var("VODLAB_DISK_SYNTH").as_deref() {
        Ok("baseline") => "baseline",
        Ok("avx2") if variant() != "baseline" => "avx2",
        _ => variant(),
    })
}

/// [`fill`] with a given variant (`avx512`, `avx2`, anything else:
/// baseline). A variant this CPU lacks runs the baseline.
pub fn fill_with(variant: &str, seed: u64, key: u64, offset: u64, buf: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    {
        let best = self::variant();
        let has = |v: &str| best == v || (v == "avx2" && best == "avx512");
        if variant == "avx512" && has("avx512") {
            // SAFETY: the CPU has the features the variant is compiled for
            return unsafe { fill_avx512(seed, key, offset, buf) };
        }
        if variant == "avx2" && has("avx2") {
            // SAFETY: as above
            return unsafe { fill_avx2(seed, key, offset, buf) };
        }
    }
    fill_impl(seed, key, offset, buf)
}

/// Variants to test: every one this CPU runs.
#[cfg(test)]
const VARIANTS: [&str; 3] = ["avx512", "avx2", "baseline"];

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use vodlab_workload::content;

    #[test]
    fn whole_blocks_equal_the_content_function() {
        let key = content::file_key("t00001/sd/00000.m4s");
        let mut want = vec![0u8; 64 * BLOCK + 777];
        content::fill(3, key, 0, &mut want);
        for v in VARIANTS {
            let mut got = vec![0xa5u8; want.len()];
            fill_with(v, 3, key, 0, &mut got);
            assert_eq!(got, want, "variant {v} (this CPU: {})", variant());
            assert!(content::check(3, key, 0, &got).is_ok());
        }
        let mut got = vec![0u8; want.len()];
        fill(3, key, 0, &mut got);
        assert_eq!(got, want);
    }

    proptest! {
        #[test]
        fn any_range_equals_the_content_function(
            seed in any::<u64>(),
            key in any::<u64>(),
            offset in 0u64..(1 << 40),
            len in 0usize..(3 * BLOCK + 50),
        ) {
            let mut want = vec![0u8; len];
            content::fill(seed, key, offset, &mut want);
            for v in VARIANTS {
                let mut got = vec![0xffu8; len];
                fill_with(v, seed, key, offset, &mut got);
                prop_assert_eq!(&got, &want, "variant {}", v);
            }
        }
    }
}
