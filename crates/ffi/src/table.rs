//! The one table of the C library: a map sharded by its key's hash, each shard behind its own
//! parking_lot mutex (which does not poison: a panic inside a shard's critical section, caught at
//! the FFI boundary, leaves the map usable and consistent, since no operation here can panic
//! halfway through an update).
//!
//! It exists because C names things by number: the native API answers batches by id, the AGIOS
//! shim releases requests by `(file, type, offset, len)`. Both keep what they dispatched here until
//! it is answered, so that answering twice is an error instead of a use-after-free. Sharding keeps
//! threads answering different keys off each other's lock.

use std::hash::{BuildHasher, Hash};

use iosets_types::hash::{IdBuildHasher, IdMap};
use parking_lot::Mutex;

/// How many shards a table has (a power of two).
const SHARDS: usize = 32;

/// A shard, alone on its cache lines so that two threads on two shards do not share one.
#[repr(align(128))]
struct Shard<K, V>(Mutex<IdMap<K, V>>);

/// A map from `K` to `V` sharded by the hash of `K`.
pub(crate) struct Table<K, V> {
    shards: Box<[Shard<K, V>]>,
}

impl<K: Hash + Eq, V> Table<K, V> {
    pub(crate) fn new() -> Table<K, V> {
        Table {
            shards: (0..SHARDS)
                .map(|_| Shard(Mutex::new(IdMap::default())))
                .collect(),
        }
    }

    fn shard(&self, key: &K) -> &Mutex<IdMap<K, V>> {
        let h = IdBuildHasher::default().hash_one(key);
        // The top bits: the hasher's finaliser mixes every input bit into them.
        &self.shards[(h >> (64 - SHARDS.trailing_zeros())) as usize].0
    }

    /// Runs `f` on the shard map that holds (or would hold) `key`, under its lock.
    pub(crate) fn with<R>(&self, key: &K, f: impl FnOnce(&mut IdMap<K, V>) -> R) -> R {
        f(&mut self.shard(key).lock())
    }

    /// Inserts `value` under `key`, returning the value it replaces.
    pub(crate) fn insert(&self, key: K, value: V) -> Option<V> {
        self.shard(&key).lock().insert(key, value)
    }

    /// Removes and returns the value under `key`.
    pub(crate) fn remove(&self, key: &K) -> Option<V> {
        self.shard(key).lock().remove(key)
    }

    /// Removes every value (at teardown).
    pub(crate) fn drain(&self) -> Vec<V> {
        let mut all = Vec::new();
        for s in self.shards.iter() {
            all.extend(s.0.lock().drain().map(|(_, v)| v));
        }
        all
    }

    /// The number of values held (takes every shard's lock in turn: not a snapshot).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|s| s.0.lock().len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_remove_drain() {
        let t: Table<u64, String> = Table::new();
        for i in 0..1000u64 {
            assert!(t.insert(i, i.to_string()).is_none());
        }
        assert_eq!(t.insert(7, "seven".into()), Some("7".into()));
        assert_eq!(t.remove(&7).as_deref(), Some("seven"));
        assert_eq!(t.remove(&7), None);
        assert_eq!(t.with(&8, |m| m.get(&8).cloned()).as_deref(), Some("8"));
        assert_eq!(t.len(), 999);
        assert_eq!(t.drain().len(), 999);
        assert_eq!(t.len(), 0);
    }

    #[test]
    fn keys_spread_over_shards() {
        let t: Table<u64, ()> = Table::new();
        let used = (0..SHARDS as u64 * 8)
            .map(|i| std::ptr::from_ref(t.shard(&(i * 1024))) as usize)
            .collect::<std::collections::HashSet<_>>();
        assert!(used.len() > SHARDS / 2, "{} shards used", used.len());
    }
}
