//! The namespace a mount presents: directories and files built from a list
//! of `(relative path, size)` in creation order, with inode numbers. Pure
//! data, no I/O.

use std::collections::HashMap;

/// Inode number of the root directory.
pub const ROOT: u64 = 1;

/// What an inode is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// A directory and its entries (name, inode) in creation order.
    Dir {
        /// Parent inode (the root is its own parent).
        parent: u64,
        /// Entries in the order they were first created.
        children: Vec<(Box<str>, u64)>,
    },
    /// A regular file.
    File {
        /// Size in bytes.
        size: u64,
        /// Index in creation order (the layout's file index).
        index: usize,
    },
    /// A file whose bytes are held in memory (e.g. `fileset.json`); not
    /// placed on the modelled drive.
    Inline {
        /// The bytes.
        data: Box<[u8]>,
    },
}

/// Errors building a tree.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TreeError {
    /// A path is empty, absolute after trimming, or has `.`/`..`/empty parts.
    #[error("bad path `{0}` in the file list")]
    BadPath(String),
    /// Two entries name the same path, or a file is also a directory.
    #[error("`{0}` appears twice in the file list (or is both a file and a directory)")]
    Duplicate(String),
}

/// Directories and files with inode numbers (1 is the root).
#[derive(Debug, Clone, Default)]
pub struct Tree {
    nodes: Vec<Node>,
    names: HashMap<(u64, Box<str>), u64>,
    files: Vec<u64>,
}

impl Tree {
    /// Builds the tree of `files` (relative paths with `/`, sizes), in order;
    /// file `i` of the list gets layout index `i`.
    pub fn build(files: impl IntoIterator<Item = (String, u64)>) -> Result<Tree, TreeError> {
        let mut t = Tree {
            nodes: vec![Node::Dir {
                parent: ROOT,
                children: Vec::new(),
            }],
            names: HashMap::new(),
            files: Vec::new(),
        };
        for (rel, size) in files {
            let index = t.files.len();
            let ino = t.insert(&rel, Node::File { size, index })?;
            t.files.push(ino);
        }
        Ok(t)
    }

    /// Adds an in-memory file at `rel` (e.g. the file set's manifest).
    pub fn add_inline(&mut self, rel: &str, data: Vec<u8>) -> Result<u64, TreeError> {
        self.insert(
            rel,
            Node::Inline {
                data: data.into_boxed_slice(),
            },
        )
    }

    fn insert(&mut self, rel: &str, node: Node) -> Result<u64, TreeError> {
        let parts: Vec<&str> = rel.trim_start_matches('/').split('/').collect();
        if parts
            .iter()
            .any(|p| p.is_empty() || *p == "." || *p == ".." || p.contains('\0'))
        {
            return Err(TreeError::BadPath(rel.to_string()));
        }
        let (leaf, dirs) = parts.split_last().expect("split yields one part");
        let mut dir = ROOT;
        for d in dirs {
            dir = match self.names.get(&(dir, Box::from(*d))) {
                Some(&ino) if matches!(self.node(ino), Some(Node::Dir { .. })) => ino,
                Some(_) => return Err(TreeError::Duplicate(rel.to_string())),
                None => self.push(
                    dir,
                    d,
                    Node::Dir {
                        parent: dir,
                        children: Vec::new(),
                    },
                ),
            };
        }
        if self.names.contains_key(&(dir, Box::from(*leaf))) {
            return Err(TreeError::Duplicate(rel.to_string()));
        }
        Ok(self.push(dir, leaf, node))
    }

    fn push(&mut self, parent: u64, name: &str, node: Node) -> u64 {
        self.nodes.push(node);
        let ino = self.nodes.len() as u64;
        let name: Box<str> = name.into();
        if let Some(Node::Dir { children, .. }) = self.nodes.get_mut(parent as usize - 1) {
            children.push((name.clone(), ino));
        }
        self.names.insert((parent, name), ino);
        ino
    }

    /// The node of an inode.
    pub fn node(&self, ino: u64) -> Option<&Node> {
        ino.checked_sub(1).and_then(|i| self.nodes.get(i as usize))
    }

    /// The entry `name` of directory `parent`.
    pub fn lookup(&self, parent: u64, name: &str) -> Option<u64> {
        self.names.get(&(parent, Box::from(name))).copied()
    }

    /// Inode of file `index` (creation order).
    pub fn file_ino(&self, index: usize) -> Option<u64> {
        self.files.get(index).copied()
    }

    /// Number of files placed on the drive (inline files excluded).
    pub fn file_count(&self) -> usize {
        self.files.len()
    }

    /// Number of inodes.
    pub fn inode_count(&self) -> u64 {
        self.nodes.len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_directories_in_creation_order() {
        let t = Tree::build(vec![
            ("b/x/1.m4s".to_string(), 10),
            ("b/x/2.m4s".to_string(), 20),
            ("a/y.mp4".to_string(), 30),
        ])
        .unwrap();
        let b = t.lookup(ROOT, "b").unwrap();
        let x = t.lookup(b, "x").unwrap();
        let f2 = t.lookup(x, "2.m4s").unwrap();
        assert_eq!(t.node(f2), Some(&Node::File { size: 20, index: 1 }));
        assert_eq!(
            t.file_ino(2),
            t.lookup(t.lookup(ROOT, "a").unwrap(), "y.mp4")
        );
        match t.node(ROOT).unwrap() {
            Node::Dir { children, .. } => {
                let names: Vec<&str> = children.iter().map(|(n, _)| &**n).collect();
                assert_eq!(names, ["b", "a"]);
            }
            n => panic!("{n:?}"),
        }
        assert_eq!(t.file_count(), 3);
        assert_eq!(t.lookup(ROOT, "zzz"), None);
    }

    #[test]
    fn refuses_duplicates_and_bad_paths() {
        let dup = Tree::build(vec![("a/b".to_string(), 1), ("a/b".to_string(), 2)]);
        assert_eq!(dup.unwrap_err(), TreeError::Duplicate("a/b".into()));
        let clash = Tree::build(vec![("a".to_string(), 1), ("a/b".to_string(), 2)]);
        assert!(matches!(clash, Err(TreeError::Duplicate(_))));
        for bad in ["", "a//b", "a/../b", "./a"] {
            let r = Tree::build(vec![(bad.to_string(), 1)]);
            assert!(matches!(r, Err(TreeError::BadPath(_))), "{bad}");
        }
    }

    #[test]
    fn inline_files_are_not_placed() {
        let mut t = Tree::build(vec![("a".to_string(), 1)]).unwrap();
        let m = t.add_inline("fileset.json", b"{}\n".to_vec()).unwrap();
        assert_eq!(t.file_count(), 1);
        assert!(matches!(t.node(m), Some(Node::Inline { .. })));
        assert!(t.add_inline("a", vec![]).is_err());
    }
}
