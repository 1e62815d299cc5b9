//! The mount's inode table: FUSE inode numbers for the objects the kernel knows, and the path
//! each one has now.
//!
//! The protocol names files by path; the kernel names them by inode number. An object is keyed
//! by `(home server, backing inode number)`, so the two names of a hard link are one inode and a
//! renamed file keeps its number, as on a local file system. Numbers are handed out from a
//! counter (never the backing numbers themselves, which a backing file system reuses), and an
//! entry lives while the kernel holds a lookup reference to it (`forget` ends it). When the last
//! name of an object goes away its key is detached, so a new file that gets the same backing
//! number gets a new inode.

use std::collections::HashMap;

use iosets_types::JobId;

/// The root's inode number (FUSE's).
pub(crate) const ROOT: u64 = 1;

/// One object the kernel holds.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    /// Its path now (relative to the servers' root; `""` for the root).
    pub path: String,
    /// Its key, while it is attached (`None` once its last name went away).
    pub key: Option<(usize, u64)>,
    /// The kernel's lookup references.
    pub lookups: u64,
    /// Hard links, when last seen.
    pub nlink: u32,
    /// The job of its last opener: what carries no caller (release, writeback) is done for it.
    pub job: Option<JobId>,
    /// Its other known names (hard links), so it keeps a name when one goes away.
    pub others: Vec<String>,
    /// The hidden name it was renamed to when unlinked while open (removed at last close).
    pub silly: Option<String>,
    /// The name whose striping layout its chunks follow, when that is not its path: the name
    /// it had when it was hidden (with separate roots a rename moves each server's part, not
    /// the chunks between servers).
    pub laid_out_as: Option<String>,
}

/// An object's key taken out before its last name is removed ([`Inodes::removing`]).
#[derive(Debug)]
#[must_use = "give it back with Inodes::kept if the removal fails"]
pub(crate) struct Detached {
    ino: u64,
    key: (usize, u64),
}

/// The table.
#[derive(Debug)]
pub(crate) struct Inodes {
    nodes: HashMap<u64, Node>,
    by_key: HashMap<(usize, u64), u64>,
    by_path: HashMap<String, u64>,
    next: u64,
}

impl Inodes {
    pub(crate) fn new() -> Inodes {
        let mut nodes = HashMap::new();
        nodes.insert(
            ROOT,
            Node {
                path: String::new(),
                key: None,
                lookups: 1,
                nlink: 2,
                job: None,
                others: Vec::new(),
                silly: None,
                laid_out_as: None,
            },
        );
        let mut by_path = HashMap::new();
        by_path.insert(String::new(), ROOT);
        Inodes {
            nodes,
            by_key: HashMap::new(),
            by_path,
            next: 16,
        }
    }

    /// How many objects the kernel holds (the root included).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }

    #[cfg(test)]
    pub(crate) fn get(&self, ino: u64) -> Option<&Node> {
        self.nodes.get(&ino)
    }

    pub(crate) fn path(&self, ino: u64) -> Option<String> {
        self.nodes.get(&ino).map(|n| n.path.clone())
    }

    /// The inode of `path`, if the kernel holds it.
    pub(crate) fn by_path(&self, path: &str) -> Option<u64> {
        self.by_path.get(path).copied()
    }

    /// Records a lookup of the object `key` at `path` (one more kernel reference) and returns
    /// its inode number.
    pub(crate) fn remember(&mut self, path: &str, key: (usize, u64), nlink: u32) -> u64 {
        if path.is_empty() {
            return ROOT;
        }
        let ino = match self.by_key.get(&key) {
            Some(&ino) => ino,
            None => {
                let ino = self.next;
                self.next += 1;
                self.by_key.insert(key, ino);
                self.nodes.insert(
                    ino,
                    Node {
                        path: String::new(),
                        key: Some(key),
                        lookups: 0,
                        nlink,
                        job: None,
                        others: Vec::new(),
                        silly: None,
                        laid_out_as: None,
                    },
                );
                ino
            }
        };
        let node = self.nodes.get_mut(&ino).expect("mapped inode");
        node.lookups += 1;
        node.nlink = nlink;
        if node.path != path {
            // Another name of the same object (a hard link): both stay valid.
            let old = std::mem::replace(&mut node.path, path.to_owned());
            node.others.retain(|p| p != path);
            if !old.is_empty() && node.others.len() < 16 {
                node.others.push(old);
            }
        }
        self.by_path.insert(path.to_owned(), ino);
        ino
    }

    /// The kernel dropped `n` references to `ino`.
    pub(crate) fn forget(&mut self, ino: u64, n: u64) {
        if ino == ROOT {
            return;
        }
        let gone = match self.nodes.get_mut(&ino) {
            Some(node) => {
                node.lookups = node.lookups.saturating_sub(n);
                node.lookups == 0
            }
            None => false,
        };
        if gone {
            let node = self.nodes.remove(&ino).expect("present");
            if let Some(key) = node.key {
                if self.by_key.get(&key) == Some(&ino) {
                    self.by_key.remove(&key);
                }
            }
            for p in std::iter::once(&node.path).chain(&node.others) {
                if self.by_path.get(p) == Some(&ino) {
                    self.by_path.remove(p);
                }
            }
        }
    }

    /// The name `path` went away (unlink, rmdir, or replaced by a rename). If it was the
    /// object's last name, its key is detached: a new object with the same backing number gets
    /// a new inode.
    pub(crate) fn unlinked(&mut self, path: &str) {
        let Some(ino) = self.by_path.remove(path) else {
            return;
        };
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.nlink = node.nlink.saturating_sub(1);
            node.others.retain(|p| p != path);
            if node.path == path {
                if let Some(other) = node.others.pop() {
                    node.path = other;
                }
            }
            let dir_or_last = node.nlink <= 1 && node.path == path;
            if dir_or_last {
                if let Some(key) = node.key.take() {
                    if self.by_key.get(&key) == Some(&ino) {
                        self.by_key.remove(&key);
                    }
                }
            }
        }
    }

    /// Before `path` is removed on the servers (unlink, rmdir, a rename over it): if it is its
    /// object's last name, the object's key is taken out now. The backing file system may give
    /// its number to a new object as soon as the removal is done there, before this mount hears
    /// back; a `remember` of that new object (another caller's mkdir, say) must then make a new
    /// inode, not hand out this one, which the kernel still holds for the old object. Returns
    /// what [`Inodes::kept`] puts back if the removal fails.
    pub(crate) fn removing(&mut self, path: &str) -> Option<Detached> {
        let ino = *self.by_path.get(path)?;
        let node = self.nodes.get_mut(&ino)?;
        let last = node.path == path
            && node.others.iter().all(|p| p == path)
            && node.nlink.saturating_sub(1) <= 1;
        if !last {
            return None;
        }
        let key = node.key.take()?;
        if self.by_key.get(&key) == Some(&ino) {
            self.by_key.remove(&key);
        }
        Some(Detached { ino, key })
    }

    /// The removal [`Inodes::removing`] prepared failed: the object keeps its key, unless the
    /// kernel forgot it meanwhile or a lookup gave the object another inode.
    pub(crate) fn kept(&mut self, detached: Detached) {
        let Detached { ino, key } = detached;
        if self.by_key.contains_key(&key) {
            return;
        }
        if let Some(node) = self.nodes.get_mut(&ino) {
            if node.key.is_none() {
                node.key = Some(key);
                self.by_key.insert(key, ino);
            }
        }
    }

    /// `from` was renamed to `to`: the object and everything under it (a directory) now live
    /// under the new name.
    pub(crate) fn renamed(&mut self, from: &str, to: &str) {
        self.unlinked(to);
        let prefix = format!("{from}/");
        let moved: Vec<(String, u64)> = self
            .by_path
            .iter()
            .filter(|(p, _)| p.as_str() == from || p.starts_with(&prefix))
            .map(|(p, &i)| (p.clone(), i))
            .collect();
        for (old, ino) in moved {
            self.by_path.remove(&old);
            let new = format!("{to}{}", &old[from.len()..]);
            if let Some(node) = self.nodes.get_mut(&ino) {
                if node.path == old {
                    node.path = new.clone();
                }
                for p in node.others.iter_mut().filter(|p| **p == old) {
                    *p = new.clone();
                }
            }
            self.by_path.insert(new, ino);
        }
    }

    /// Marks `ino` as unlinked while open, now under the hidden name `silly`; its chunks stay
    /// where the layout of `was` (its name before) put them.
    pub(crate) fn set_silly(&mut self, ino: u64, silly: &str, was: &str) {
        if let Some(n) = self.nodes.get_mut(&ino) {
            n.silly = Some(silly.to_owned());
            n.laid_out_as.get_or_insert_with(|| was.to_owned());
        }
    }

    /// The name whose layout the chunks of `ino` follow, if not its path's.
    pub(crate) fn laid_out_as(&self, ino: u64) -> Option<String> {
        self.nodes.get(&ino).and_then(|n| n.laid_out_as.clone())
    }

    /// Whether `ino` was unlinked while open (its last name is a hidden one).
    pub(crate) fn is_silly(&self, ino: u64) -> bool {
        self.nodes.get(&ino).is_some_and(|n| n.silly.is_some())
    }

    /// Takes the hidden name of `ino`, if it was unlinked while open.
    pub(crate) fn take_silly(&mut self, ino: u64) -> Option<String> {
        self.nodes.get_mut(&ino).and_then(|n| n.silly.take())
    }

    /// Remembers the job of the last opener of `ino`.
    pub(crate) fn set_job(&mut self, ino: u64, job: JobId) {
        if let Some(n) = self.nodes.get_mut(&ino) {
            n.job = Some(job);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_reused_while_a_removal_is_under_way_gets_a_new_inode() {
        let mut t = Inodes::new();
        let old = t.remember("a/d", (0, 77), 2);
        // rmdir a/d is sent; before its answer, the servers' mkdir b/d got backing number 77.
        let detached = t.removing("a/d").expect("its last name");
        let new = t.remember("b/d", (0, 77), 2);
        assert_ne!(new, old);
        t.unlinked("a/d");
        assert_eq!(t.by_path("b/d"), Some(new));
        assert_eq!(t.get(new).unwrap().key, Some((0, 77)));
        drop(detached);
        // A removal that fails keeps the key: the next lookup finds the same inode.
        let mut t = Inodes::new();
        let ino = t.remember("x", (0, 5), 1);
        let detached = t.removing("x").unwrap();
        t.kept(detached);
        assert_eq!(t.remember("x", (0, 5), 1), ino);
        // A hard link whose other name is known stays: nothing is taken out.
        let mut t = Inodes::new();
        let ino = t.remember("l1", (0, 9), 2);
        assert_eq!(t.remember("l2", (0, 9), 2), ino);
        assert!(t.removing("l1").is_none());
        assert!(t.removing("l2").is_none());
    }

    #[test]
    fn hard_links_share_an_inode_and_renames_keep_it() {
        let mut t = Inodes::new();
        let a = t.remember("d/a", (0, 100), 1);
        let b = t.remember("d/b", (0, 100), 2);
        assert_eq!(a, b);
        let c = t.remember("d/c", (0, 101), 1);
        assert_ne!(a, c);
        // Removing one name of a hard link keeps the object reachable by the other.
        t.unlinked("d/b");
        assert_eq!(t.path(a).unwrap(), "d/a");
        t.renamed("d", "e");
        assert_eq!(t.path(c).unwrap(), "e/c");
        assert_eq!(t.path(a).unwrap(), "e/a");
        assert_eq!(t.by_path("e/c"), Some(c));
        assert_eq!(t.by_path("d/c"), None);
    }

    #[test]
    fn a_reused_backing_number_after_the_last_unlink_is_a_new_inode() {
        let mut t = Inodes::new();
        let a = t.remember("f", (0, 7), 1);
        t.unlinked("f");
        let b = t.remember("g", (0, 7), 1);
        assert_ne!(a, b, "the kernel may still hold the old inode");
        t.forget(a, 1);
        assert!(t.get(a).is_none());
        assert!(t.get(b).is_some());
    }

    #[test]
    fn forget_drops_the_entry_at_zero_references() {
        let mut t = Inodes::new();
        let a = t.remember("x", (1, 5), 1);
        t.remember("x", (1, 5), 1);
        t.forget(a, 1);
        assert!(t.get(a).is_some());
        t.forget(a, 1);
        assert!(t.get(a).is_none());
        assert_eq!(t.len(), 1);
        t.forget(ROOT, 10);
        assert_eq!(t.path(ROOT).unwrap(), "");
    }
}
