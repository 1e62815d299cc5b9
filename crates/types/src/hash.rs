//! A fast hasher for the integer ids (jobs, requests, sets) that schedulers key their maps by.
//!
//! SipHash would dominate the scheduling hot path; ids are small integers, and a scheduler's maps
//! hold only the jobs and requests it currently has, so flooding resistance buys nothing here.
//! The mixer is the 64-bit finaliser of MurmurHash3, which spreads sequential ids over all bits.

use std::hash::{BuildHasherDefault, Hasher};

/// Hashes one `u64` (or a few small integers) by mixing their bits.
#[derive(Default, Clone, Copy, Debug)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = self.0.rotate_left(29) ^ n;
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    fn write_u8(&mut self, n: u8) {
        self.write_u64(u64::from(n));
    }
}

/// Builds [`IdHasher`]s.
pub type IdBuildHasher = BuildHasherDefault<IdHasher>;

/// A `HashMap` keyed by ids, hashed with [`IdHasher`].
pub type IdMap<K, V> = std::collections::HashMap<K, V, IdBuildHasher>;

/// FNV-1a 64 of `bytes`: a hash that is the same in every process, run and version (unlike
/// `std`'s seeded `RandomState`). The client's stripe layout places path `p` by it, and the server
/// and the C library turn a path or an AGIOS file name into a [`FileId`](crate::FileId) with it.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h = OFFSET;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(PRIME);
    }
    h
}
