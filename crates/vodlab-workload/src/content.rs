//! Verifiable file content: every byte of a vodlab file set is a function of
//! (seed, file path, offset), so a client can check any byte range it
//! receives without the files, and `vodlab fileset verify` can find damage.
//!
//! Layout: the file is cut into 4 KiB blocks. Each block starts with a
//! 24-byte header — magic `VLB1`, the file key (FNV-1a 64 of the relative
//! path, little endian), the block's byte offset (u64 LE), and a 4-byte
//! check of the three — followed by pseudo-random bytes from a SplitMix64
//! stream seeded by (seed, file key, block index). A last partial block is
//! the prefix of a full one.

/// Block size.
pub const BLOCK: usize = 4096;
/// Header size at the start of every block.
pub const HEADER: usize = 24;
const MAGIC: &[u8; 4] = b"VLB1";

/// FNV-1a 64 offset basis: the hash of no bytes.
pub const FNV_BASIS: u64 = 0xcbf2_9ce4_8422_2325;

/// Continues an FNV-1a 64 hash `h` over `bytes` (start from [`FNV_BASIS`]).
pub fn fnv1a(mut h: u64, bytes: impl IntoIterator<Item = u8>) -> u64 {
    for b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// FNV-1a 64 of a file's path relative to the file-set root (no leading `/`).
pub fn file_key(rel_path: &str) -> u64 {
    fnv1a(FNV_BASIS, rel_path.trim_start_matches('/').bytes())
}

#[inline]
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Writes the full 4 KiB block `index` of a file into `out`.
pub fn block(seed: u64, key: u64, index: u64, out: &mut [u8; BLOCK]) {
    let offset = index * BLOCK as u64;
    out[..4].copy_from_slice(MAGIC);
    out[4..12].copy_from_slice(&key.to_le_bytes());
    out[12..20].copy_from_slice(&offset.to_le_bytes());
    let mut st = seed ^ key.rotate_left(17) ^ index.wrapping_mul(0xd6e8_feb8_6659_fd93);
    let check = (splitmix(&mut st.clone()) as u32).to_le_bytes();
    out[20..24].copy_from_slice(&check);
    for chunk in out[HEADER..].chunks_exact_mut(8) {
        chunk.copy_from_slice(&splitmix(&mut st).to_le_bytes());
    }
}

/// Fills `buf` with the content of bytes `offset .. offset + buf.len()` of
/// the file with `key`. Any offset and length.
pub fn fill(seed: u64, key: u64, offset: u64, buf: &mut [u8]) {
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

/// Checks `data`, claimed to be bytes `offset ..` of the file with `key`.
/// Returns the absolute offset of the first wrong byte.
pub fn check(seed: u64, key: u64, offset: u64, data: &[u8]) -> Result<(), u64> {
    let mut scratch = [0u8; BLOCK];
    let mut pos = 0usize;
    while pos < data.len() {
        let abs = offset + pos as u64;
        let index = abs / BLOCK as u64;
        let within = (abs % BLOCK as u64) as usize;
        let n = (BLOCK - within).min(data.len() - pos);
        block(seed, key, index, &mut scratch);
        if scratch[within..within + n] != data[pos..pos + n] {
            let i = (0..n)
                .find(|&i| scratch[within + i] != data[pos + i])
                .expect("a byte differs");
            return Err(abs + i as u64);
        }
        pos += n;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_range_matches_the_whole() {
        let key = file_key("t00001/sd/00000.m4s");
        let mut whole = vec![0u8; 3 * BLOCK + 100];
        fill(7, key, 0, &mut whole);
        for (off, len) in [
            (0, 10),
            (5, 4096),
            (4090, 20),
            (8192, 4196),
            (100, 3 * BLOCK),
        ] {
            let mut part = vec![0u8; len];
            fill(7, key, off as u64, &mut part);
            assert_eq!(part, whole[off..off + len]);
            assert_eq!(check(7, key, off as u64, &part), Ok(()));
        }
        assert_eq!(&whole[..4], b"VLB1");
        assert_eq!(
            u64::from_le_bytes(whole[BLOCK + 12..BLOCK + 20].try_into().unwrap()),
            BLOCK as u64
        );
    }

    #[test]
    fn a_flipped_byte_is_found_where_it_is() {
        let key = file_key("a");
        let mut data = vec![0u8; 10_000];
        fill(1, key, 500, &mut data);
        data[7777] ^= 0x20;
        assert_eq!(check(1, key, 500, &data), Err(500 + 7777));
        // the wrong file or seed fails at once
        let mut d2 = vec![0u8; 64];
        fill(1, key, 0, &mut d2);
        assert_eq!(check(1, file_key("b"), 0, &d2), Err(4));
        assert!(check(2, key, 0, &d2).is_err());
    }

    #[test]
    fn leading_slash_does_not_change_the_key() {
        assert_eq!(file_key("/t1/sd.mp4"), file_key("t1/sd.mp4"));
    }
}
