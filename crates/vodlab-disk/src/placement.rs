//! Placing a file set on the linear block space, the way a fresh UFS/ext
//! file system places files written one after another into one directory
//! (thesis §3.5.2): in creation order, each file's data contiguous and
//! aligned to the file-system block, a title's files consecutive, the whole
//! set starting at the low end of the drive or ending at its high end.
//!
//! Each file also has a **metadata extent**: the block holding its inode and
//! indirect-block pointers, in the metadata area at the head of the
//! allocation group (UFS cylinder group) where its data starts. A reader
//! opening a file for the first time reads it (the FUSE daemon: on lookup),
//! which costs a short seek away from the data and back with two rotational
//! latencies — the per-file cost that makes chunked file sets slower
//! (docs/disk.md derives the parameters from the thesis's Table 3.4).
//! Metadata extents are addresses for the model, not reserved space: they may
//! overlap data addresses.

use serde::{Deserialize, Serialize};

use crate::error::DiskError;
use crate::model::Request;

/// Which end of the drive the file set is placed at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Origin {
    /// From address 0 upwards (outer tracks, fastest).
    #[default]
    Low,
    /// Ending at the last address (inner tracks, slowest), still in
    /// ascending creation order.
    High,
}

impl std::str::FromStr for Origin {
    type Err = DiskError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "low" => Ok(Origin::Low),
            "high" => Ok(Origin::High),
            _ => Err(DiskError::InvalidOption {
                key: "placement",
                reason: format!("`{s}`: expected low or high"),
            }),
        }
    }
}

/// How files are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlacementConfig {
    /// Which end of the drive.
    pub origin: Origin,
    /// Every file's data starts on a multiple of this (the file-system block),
    /// bytes; ≥ 1.
    pub block_bytes: u64,
    /// Size of one metadata read, bytes (0: no per-file metadata).
    pub meta_bytes: u64,
    /// Metadata reads per file (inode block, indirect block, ...), each at
    /// its own place in the group's metadata area.
    pub meta_reads: u32,
    /// Size of an allocation group whose head holds the metadata of the
    /// files starting in it, bytes.
    pub group_bytes: u64,
}

impl Default for PlacementConfig {
    /// The values calibrated on the thesis's FreeBSD UFS2 file sets
    /// (docs/disk.md): 16 KiB blocks, two 16 KiB metadata reads per file
    /// (inode and first indirect block), 188 MiB cylinder groups.
    fn default() -> Self {
        PlacementConfig {
            origin: Origin::Low,
            block_bytes: 16 << 10,
            meta_bytes: 16 << 10,
            meta_reads: 2,
            group_bytes: 188 << 20,
        }
    }
}

impl PlacementConfig {
    /// Distance between a file's successive metadata reads, bytes.
    pub fn meta_stride(&self) -> u64 {
        self.group_bytes / (2 * self.meta_reads.max(1) as u64)
    }
}

/// Where one file lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileExtent {
    /// Byte address of the file's first byte.
    pub offset: u64,
    /// File size, bytes.
    pub len: u64,
    /// Address of its first metadata read, if the layout has metadata; read
    /// `j` is `j · group_bytes / (2 · meta_reads)` further.
    pub meta_offset: Option<u64>,
}

/// Builds a [`Layout`]: push files in creation order, pad where the file set
/// pads (e.g. at the end of a title).
#[derive(Debug, Clone)]
pub struct LayoutBuilder {
    cfg: PlacementConfig,
    cursor: u64,
    files: Vec<(u64, u64)>,
}

impl LayoutBuilder {
    /// An empty layout.
    pub fn new(cfg: PlacementConfig) -> Result<LayoutBuilder, DiskError> {
        if cfg.block_bytes == 0 {
            return Err(DiskError::InvalidOption {
                key: "block_bytes",
                reason: "must be ≥ 1".into(),
            });
        }
        if cfg.meta_bytes > 0
            && cfg.meta_reads > 0
            && cfg.group_bytes < 2 * cfg.meta_bytes * cfg.meta_reads as u64
        {
            return Err(DiskError::InvalidOption {
                key: "group_bytes",
                reason: "must be at least 2 · meta_bytes · meta_reads".into(),
            });
        }
        Ok(LayoutBuilder {
            cfg,
            cursor: 0,
            files: Vec::new(),
        })
    }

    /// Appends a file of `size` bytes; returns its index (creation order).
    pub fn push_file(&mut self, size: u64) -> usize {
        let off = self.cursor.next_multiple_of(self.cfg.block_bytes);
        self.files.push((off, size));
        self.cursor = off + size;
        self.files.len() - 1
    }

    /// Leaves the cursor on a multiple of `align` bytes (e.g. pad a title).
    pub fn pad_to(&mut self, align: u64) {
        if align > 0 {
            self.cursor = self.cursor.next_multiple_of(align);
        }
    }

    /// Skips `bytes` of address space.
    pub fn skip(&mut self, bytes: u64) {
        self.cursor += bytes;
    }

    /// Places the set on a drive of `capacity` bytes.
    pub fn finish(self, capacity: u64) -> Result<Layout, DiskError> {
        let used = self.cursor.next_multiple_of(self.cfg.block_bytes);
        if used > capacity {
            return Err(DiskError::DoesNotFit {
                needed: used,
                capacity,
            });
        }
        let base = match self.cfg.origin {
            Origin::Low => 0,
            Origin::High => (capacity - used) / self.cfg.block_bytes * self.cfg.block_bytes,
        };
        let mut files = Vec::with_capacity(self.files.len());
        let (mut group, mut in_group) = (u64::MAX, 0u64);
        for (off, len) in self.files {
            let offset = base + off;
            let meta_offset = (self.cfg.meta_bytes > 0 && self.cfg.meta_reads > 0).then(|| {
                let g = offset / self.cfg.group_bytes;
                if g != group {
                    group = g;
                    in_group = 0;
                }
                let slots = (self.cfg.meta_stride() / self.cfg.meta_bytes).max(1);
                let m = g * self.cfg.group_bytes + (in_group % slots) * self.cfg.meta_bytes;
                in_group += 1;
                m
            });
            files.push(FileExtent {
                offset,
                len,
                meta_offset,
            });
        }
        Ok(Layout {
            cfg: self.cfg,
            capacity,
            base,
            used,
            files,
        })
    }
}

/// A file set placed on a drive.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Layout {
    cfg: PlacementConfig,
    capacity: u64,
    base: u64,
    used: u64,
    files: Vec<FileExtent>,
}

impl Layout {
    /// Places files of the given sizes back to back (block-aligned) in this
    /// order, without extra padding.
    pub fn sequential(
        sizes: impl IntoIterator<Item = u64>,
        capacity: u64,
        cfg: PlacementConfig,
    ) -> Result<Layout, DiskError> {
        let mut b = LayoutBuilder::new(cfg)?;
        for s in sizes {
            b.push_file(s);
        }
        b.finish(capacity)
    }

    /// The configuration used.
    pub fn config(&self) -> &PlacementConfig {
        &self.cfg
    }

    /// Number of files.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// True when there are no files.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// First address of the set.
    pub fn start(&self) -> u64 {
        self.base
    }

    /// Address space the set spans, bytes.
    pub fn span(&self) -> u64 {
        self.used
    }

    /// File `i`.
    pub fn file(&self, i: usize) -> Option<&FileExtent> {
        self.files.get(i)
    }

    /// All files in creation order.
    pub fn files(&self) -> &[FileExtent] {
        &self.files
    }

    /// The drive read for `len` bytes at `offset` within file `i`, clipped
    /// to the file's end; `None` when `i` is unknown or the range is empty.
    pub fn read(&self, i: usize, offset: u64, len: u64) -> Option<Request> {
        let f = self.files.get(i)?;
        let end = offset.saturating_add(len).min(f.len);
        (offset < end).then(|| Request {
            offset: f.offset + offset,
            len: end - offset,
            file: Some(i as u64),
        })
    }

    /// The metadata reads of file `i`, in order (what opening it costs on
    /// disk); empty when `i` is unknown or the layout has no metadata.
    pub fn meta_reads(&self, i: usize) -> Vec<Request> {
        let Some(m) = self.files.get(i).and_then(|f| f.meta_offset) else {
            return Vec::new();
        };
        let cap_end = self.capacity;
        (0..self.cfg.meta_reads as u64)
            .map(|j| Request {
                offset: (m + j * self.cfg.meta_stride()).min(cap_end - self.cfg.meta_bytes),
                len: self.cfg.meta_bytes,
                file: Some(i as u64),
            })
            .collect()
    }
}
