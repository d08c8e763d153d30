//! The streaming manifests of a file set (DASH MPDs, HLS playlists), written
//! after the media and checked by `verify` against the catalog's text.

use std::fs;
use std::io;
use std::path::Path;

use vodlab_workload::construct::Catalog;

use crate::{io_err, Damage, FilesetError};

/// Writes every manifest of the catalog (none without `[catalog.manifests]`)
/// through a temporary file and a rename, so a reader never sees half a
/// manifest. Returns (files, bytes).
pub(crate) fn write_all(root: &Path, catalog: &Catalog) -> Result<(u64, u64), FilesetError> {
    let (mut files, mut bytes) = (0u64, 0u64);
    for m in vodlab_manifest::manifests(catalog) {
        let path = root.join(&m.rel);
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).map_err(io_err(dir))?;
        }
        let tmp = path.with_extension("tmp");
        fs::write(&tmp, m.text.as_bytes()).map_err(io_err(&tmp))?;
        fs::rename(&tmp, &path).map_err(io_err(&path))?;
        files += 1;
        bytes += m.text.len() as u64;
    }
    Ok((files, bytes))
}

/// Compares every manifest on disk with the catalog's text; a missing or
/// different one is reported as damage. Returns (files, bytes) checked.
pub(crate) fn verify_all(root: &Path, catalog: &Catalog, damaged: &mut Vec<Damage>) -> (u64, u64) {
    let (mut files, mut bytes) = (0u64, 0u64);
    for m in vodlab_manifest::manifests(catalog) {
        files += 1;
        let problem = match fs::read(root.join(&m.rel)) {
            Ok(b) if b == m.text.as_bytes() => {
                bytes += b.len() as u64;
                continue;
            }
            Ok(b) => {
                let at = b
                    .iter()
                    .zip(m.text.as_bytes())
                    .position(|(x, y)| x != y)
                    .unwrap_or(b.len().min(m.text.len()));
                format!(
                    "manifest differs from the catalog's at byte {at} ({} bytes, expected {})",
                    b.len(),
                    m.text.len()
                )
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => "manifest missing".to_string(),
            Err(e) => format!("cannot read manifest: {e}"),
        };
        damaged.push(Damage {
            rel: m.rel,
            problem,
        });
    }
    (files, bytes)
}
