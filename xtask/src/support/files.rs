//! Files written safely and named by content: atomic writes, the advisory lock that keeps two
//! invocations apart, and sha256 digests in hex. A leaf: it depends on no other module but
//! `progress`, so `cache`, `source` and the rest share it without depending on each other.

use std::fs::{File, TryLockError};
use std::io::Read;
use std::path::Path;

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

/// Writes a file through a temporary sibling and a rename, so readers never see half of it.
/// The file is made readable by all (0644 under the usual umask), as any new file would be, so a
/// CI uploader or a web server running as another user can read the reports: a temporary file
/// alone would be 0600.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let dir = path.parent().context("path has no parent")?;
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::Builder::new()
        .permissions(std::fs::Permissions::from_mode(0o644))
        .tempfile_in(dir)
        .with_context(|| format!("creating a temporary file in {}", dir.display()))?;
    std::io::Write::write_all(&mut tmp, bytes)?;
    tmp.persist(path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// An advisory lock on a file, exclusive or shared, released on drop (also when the process
/// dies).
pub struct Lock {
    _file: File,
}

impl Lock {
    /// The exclusive lock: no other holder of either kind.
    pub fn acquire(path: &Path) -> Result<Lock> {
        Lock::take(path, false)
    }

    /// A shared lock: other shared holders, no exclusive one.
    pub fn acquire_shared(path: &Path) -> Result<Lock> {
        Lock::take(path, true)
    }

    fn take(path: &Path, shared: bool) -> Result<Lock> {
        std::fs::create_dir_all(path.parent().context("lock path has no parent")?)?;
        let file = File::create(path).with_context(|| format!("creating lock {}", path.display()))?;
        let tried = if shared { file.try_lock_shared() } else { file.try_lock() };
        match tried {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                // Another xtask, or another arch of this one (a build waits while the mirror is
                // synced for its sibling).
                crate::support::progress::line(format!(
                    "waiting for the lock {} (another build holds it)",
                    path.display()
                ));
                let locked = if shared { file.lock_shared() } else { file.lock() };
                locked.with_context(|| format!("locking {}", path.display()))?;
            }
            Err(TryLockError::Error(e)) => return Err(e).with_context(|| format!("locking {}", path.display())),
        }
        Ok(Lock { _file: file })
    }
}

/// Lower-case hex of bytes (a digest's usual spelling).
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The sha256 of some bytes, in hex.
pub fn sha256_hex(bytes: impl AsRef<[u8]>) -> String {
    hex(&Sha256::digest(bytes))
}

/// The sha256 of a file's content, in hex, read in 1 MiB pieces.
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_excludes_a_second_holder() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l/lock");
        let held = Lock::acquire(&path).unwrap();
        let other = File::create(&path).unwrap();
        assert!(matches!(other.try_lock(), Err(TryLockError::WouldBlock)));
        drop(held);
        assert!(other.try_lock().is_ok());
    }

    #[test]
    fn digests_are_hex_sha256() {
        let empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        assert_eq!(sha256_hex(b""), empty);
        assert_eq!(hex(&[0, 0xab, 0x7f]), "00ab7f");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        write_atomic(&file, b"abc").unwrap();
        assert_eq!(sha256_file(&file).unwrap(), sha256_hex(b"abc"));
        assert_eq!(std::fs::read(&file).unwrap(), b"abc");
    }

    #[test]
    fn written_files_are_readable_by_all() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("report.html");
        write_atomic(&file, b"<p>").unwrap();
        // A umask may take write bits away; the usual ones (022, 002) leave the read bits.
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode & 0o044, 0o044, "mode {mode:o}");
        assert_eq!(mode & 0o111, 0, "mode {mode:o}");
    }
}
