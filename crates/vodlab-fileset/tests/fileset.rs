//! File sets on the real disk (under the target directory, not tmpfs, so the
//! page-cache operations mean something).

use std::fs;
use std::path::{Path, PathBuf};

use vodlab_fileset::{
    cool, create, entries, read_manifest, resident_bytes, seqread, verify, warm, CreateOptions,
    FilesetError,
};
use vodlab_workload::construct::{construct, Workload};
use vodlab_workload::script::Script;
use vodlab_workload::{presets, Overrides};

fn workload(preset: &str, seed: u64) -> Workload {
    let mut spec = presets::load(preset).unwrap();
    spec.apply(
        &Overrides {
            seed: Some(seed),
            titles: Some(12),
            sessions: Some(30),
            ..Default::default()
        },
        preset,
    )
    .unwrap();
    construct(&spec)
}

fn scripts(w: &Workload) -> Vec<Script> {
    vec![Script {
        sessions: w.sessions.iter().map(|g| w.session(g)).collect(),
    }]
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

fn make(root: &Path, w: &Workload) {
    create(
        root,
        &w.spec.name,
        w.spec.measurement.seed,
        &w.catalog,
        &CreateOptions::default(),
        &mut |_, _| {},
    )
    .unwrap();
}

fn tree(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push((
                    p.strip_prefix(root).unwrap().to_path_buf(),
                    fs::read(&p).unwrap(),
                ));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn sizes_match_the_catalog_and_every_block_verifies() {
    let t = tmp();
    let w = workload("youtube-2011", 1);
    make(t.path(), &w);
    let list = entries(&w.catalog);
    for e in &list {
        assert_eq!(
            fs::metadata(t.path().join(&e.rel)).unwrap().len(),
            e.size,
            "{}",
            e.rel
        );
    }
    let m = read_manifest(t.path()).unwrap();
    assert!(m.complete);
    assert_eq!(m.files, list.len() as u64);
    let rep = verify(t.path(), &w.catalog, None, 0, &mut |_, _| {}).unwrap();
    assert!(rep.damaged.is_empty(), "{:?}", rep.damaged);
    assert_eq!(rep.files, list.len() as u64);

    // flip one byte in the middle of one file: verify names the file and the byte
    let victim = &list[list.len() / 2];
    let p = t.path().join(&victim.rel);
    let mut bytes = fs::read(&p).unwrap();
    bytes[300_001] ^= 1;
    fs::write(&p, bytes).unwrap();
    let rep = verify(t.path(), &w.catalog, None, 0, &mut |_, _| {}).unwrap();
    assert_eq!(rep.damaged.len(), 1);
    assert_eq!(rep.damaged[0].rel, victim.rel);
    assert!(
        rep.damaged[0].problem.contains("byte 300001"),
        "{:?}",
        rep.damaged
    );
}

#[test]
fn unchunked_titles_take_the_same_space_as_chunked_ones() {
    let (a, b) = (
        workload("youtube-2011", 3),
        workload("youtube-2011-unchunked", 3),
    );
    let sum = |w: &Workload| entries(&w.catalog).iter().map(|e| e.size).sum::<u64>();
    assert_eq!(sum(&a), sum(&b));
}

#[test]
fn the_same_seed_gives_the_same_creation_order() {
    let order = |seed| entries(&workload("youtube-2011", seed).catalog);
    assert_eq!(order(5), order(5));
    assert_ne!(order(5), order(6));
    // each title's chunks are consecutive
    let list = order(5);
    let titles: Vec<&str> = list
        .iter()
        .map(|e| e.rel.split('/').next().unwrap())
        .collect();
    let mut seen = std::collections::HashSet::new();
    for w in titles.windows(2) {
        if w[0] != w[1] {
            assert!(seen.insert(w[0]), "title {} split", w[0]);
        }
    }
}

#[test]
fn an_interrupted_creation_resumes_to_an_identical_set() {
    let (full, cut) = (tmp(), tmp());
    let w = workload("youtube-2011-2mb", 2);
    make(full.path(), &w);
    let opts = CreateOptions {
        stop_after_files: Some(7),
        ..Default::default()
    };
    create(
        cut.path(),
        &w.spec.name,
        2,
        &w.catalog,
        &opts,
        &mut |_, _| {},
    )
    .unwrap();
    assert!(!read_manifest(cut.path()).unwrap().complete);
    // the interruption also left the last file half written and damaged its tail
    let list = entries(&w.catalog);
    let last = cut.path().join(&list[6].rel);
    let f = fs::OpenOptions::new().write(true).open(&last).unwrap();
    f.set_len(list[6].size / 2).unwrap();
    let prev = cut.path().join(&list[5].rel);
    let mut b = fs::read(&prev).unwrap();
    let n = b.len();
    b[n - 1] ^= 0xff;
    fs::write(&prev, b).unwrap();
    let rep = create(
        cut.path(),
        &w.spec.name,
        2,
        &w.catalog,
        &CreateOptions::default(),
        &mut |_, _| {},
    )
    .unwrap();
    assert_eq!(
        rep.kept_files, 5,
        "resumes at the damaged file before the short one"
    );
    assert!(
        tree(full.path()) == tree(cut.path()),
        "resumed set differs from a fresh one"
    );
}

#[test]
fn refuses_foreign_and_other_workload_directories_and_dry_run_writes_nothing() {
    let t = tmp();
    fs::write(t.path().join("notes.txt"), "mine").unwrap();
    let w = workload("youtube-2011", 1);
    let e = create(
        t.path(),
        "x",
        1,
        &w.catalog,
        &CreateOptions::default(),
        &mut |_, _| {},
    )
    .unwrap_err();
    assert!(matches!(e, FilesetError::Foreign(_)), "{e}");

    let t2 = tmp();
    make(t2.path(), &w);
    let other = workload("youtube-2011", 9);
    let e = create(
        t2.path(),
        "y",
        9,
        &other.catalog,
        &CreateOptions::default(),
        &mut |_, _| {},
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("holds a file set of workload"),
        "{e}"
    );

    let t3 = tmp();
    let dry = CreateOptions {
        dry_run: true,
        ..Default::default()
    };
    let rep = create(
        &t3.path().join("new"),
        "x",
        1,
        &w.catalog,
        &dry,
        &mut |_, _| {},
    )
    .unwrap();
    assert_eq!(
        rep.written_bytes,
        entries(&w.catalog).iter().map(|e| e.size).sum::<u64>()
    );
    assert!(!t3.path().join("new").exists());
}

#[test]
fn cool_evicts_warm_reads_the_popular_chunks_and_seqread_reads_each_once() {
    let t = tmp();
    let w = workload("youtube-2011", 4);
    make(t.path(), &w);
    let s = scripts(&w);
    cool(t.path(), &w.catalog).unwrap();
    let resident: u64 = entries(&w.catalog)
        .iter()
        .map(|e| resident_bytes(&t.path().join(&e.rel)).unwrap())
        .sum();
    assert_eq!(resident, 0, "cool left pages in the cache");
    let top = vodlab_fileset::popular_chunks(&w.catalog, &s);
    let rep = warm(t.path(), &w.catalog, &s, 3).unwrap();
    assert_eq!(rep.chunks, 3);
    for (c, _) in top.iter().take(3) {
        assert!(
            resident_bytes(&t.path().join(&c.rel)).unwrap() >= c.len,
            "{} not warm",
            c.rel
        );
    }
    let unique = top.len() as u64;
    let rep = seqread(t.path(), &w.catalog, &s, 1).unwrap();
    assert_eq!(rep.chunks, unique);
    assert_eq!(rep.bytes, top.iter().map(|(c, _)| c.len).sum::<u64>());
    assert!(rep.mib_per_s() > 0.0);
}

/// Runs `f` on a thread and fails the test if it has not returned in 10 s
/// (a FIFO open or read would block forever).
fn within_10s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(10))
        .expect("blocked on a FIFO for more than 10 s")
}

#[test]
fn a_fifo_in_the_set_is_a_named_error_and_never_blocks() {
    let t = tmp();
    let w = workload("youtube-2011", 5);
    make(t.path(), &w);
    let list = entries(&w.catalog);
    let victim = list[list.len() / 2].rel.clone();
    let path = t.path().join(&victim);
    fs::remove_file(&path).unwrap();
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);

    let root = t.path().to_path_buf();
    let catalog = w.catalog.clone();
    let rep = within_10s(move || verify(&root, &catalog, None, 1, &mut |_, _| {})).unwrap();
    assert_eq!(rep.files, list.len() as u64);
    assert_eq!(rep.damaged.len(), 1, "{:?}", rep.damaged);
    assert_eq!(rep.damaged[0].rel, victim);
    assert!(
        rep.damaged[0].problem.contains("FIFO"),
        "{}",
        rep.damaged[0].problem
    );

    let root = t.path().to_path_buf();
    let catalog = w.catalog.clone();
    let e = within_10s(move || cool(&root, &catalog)).unwrap_err();
    assert!(
        matches!(&e, FilesetError::NotAFile { path: p, .. } if p.ends_with(&victim)),
        "{e}"
    );
    assert!(e.to_string().contains("FIFO"), "{e}");

    let p2 = path.clone();
    let e = within_10s(move || resident_bytes(&p2)).unwrap_err();
    assert!(e.to_string().contains("FIFO"), "{e}");

    // create (resuming) replaces nothing it cannot write: it refuses the FIFO by name
    let root = t.path().to_path_buf();
    let w2 = w.clone();
    let e = within_10s(move || {
        create(
            &root,
            &w2.spec.name,
            w2.spec.measurement.seed,
            &w2.catalog,
            &CreateOptions::default(),
            &mut |_, _| {},
        )
    })
    .unwrap_err();
    assert!(e.to_string().contains(&victim), "{e}");
}
