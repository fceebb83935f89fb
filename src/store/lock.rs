//! One process per SQLite store file: an exclusive advisory lock on a sidecar file,
//! held for as long as the store is open.
//!
//! SQLite's own locks only serialise transactions; they do not stop a second
//! gateway from opening the same file, and a second gateway would mark every task
//! the first one is running FAILED at start-up recovery and then race it on every
//! task's event log. So the SQLite store takes an exclusive `flock` on
//! `<database file>.lock` before it opens any connection, writes its process id
//! into it, and keeps the lock until it is closed or the process ends. The kernel
//! drops the lock of a process that dies (SIGKILL, a crash, power loss), so a stale
//! lock file never blocks a restart; the file itself is left in place (removing it
//! would let two processes lock two different files of the same name).
//!
//! The lock is advisory: it keeps out other a2a-gateway processes (and anything
//! else that takes it), not a tool that writes the database without asking. It
//! works on local file systems; on a network file system `flock` may be emulated
//! or missing, and SQLite itself is not safe there either.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::StoreError;

/// The exclusive lock on a SQLite store file (see the module docs). Released when
/// dropped or by [`release`](Self::release).
#[derive(Debug)]
pub struct StoreLock {
    /// The lock file; `None` once released.
    file: Mutex<Option<File>>,
    path: PathBuf,
}

/// The lock file of the database at `db`: the same directory and name plus
/// `.lock`, after resolving symbolic links of an existing file so that every path
/// to one database names one lock file.
pub fn lock_path(db: &Path) -> PathBuf {
    let db = db.canonicalize().unwrap_or_else(|_| db.to_path_buf());
    let mut name = db.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    db.with_file_name(name)
}

impl StoreLock {
    /// Takes the lock of the database at `db` without waiting, and records this
    /// process's id in the lock file.
    ///
    /// # Errors
    /// [`StoreError::Backend`] naming the database file, the lock file and the
    /// process id recorded by the holder when another process holds the lock; or
    /// naming the lock file and the OS error when it cannot be created or locked.
    pub fn acquire(db: &Path) -> Result<Self, StoreError> {
        let path = lock_path(db);
        let cannot = |what: &str, e: std::io::Error| {
            StoreError::Backend(format!(
                "cannot {what} the lock file {} of the SQLite store {} (store.url): {e}",
                path.display(),
                db.display()
            ))
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| cannot("create", e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut text = String::new();
                let holder = match file.read_to_string(&mut text) {
                    Ok(_) => text
                        .trim()
                        .parse::<u32>()
                        .map_or_else(|_| "pid unknown".to_owned(), |pid| format!("pid {pid}")),
                    Err(_) => "pid unknown".to_owned(),
                };
                return Err(StoreError::Backend(format!(
                    "the SQLite store {} (store.url) is in use by another process ({holder}, \
                     lock file {}); a SQLite store serves one gateway process at a time: stop \
                     that process first, or use PostgreSQL for several instances",
                    db.display(),
                    path.display()
                )));
            }
            Err(TryLockError::Error(e)) => return Err(cannot("lock", e)),
        }
        let record = |file: &mut File| -> std::io::Result<()> {
            file.set_len(0)?;
            file.seek(SeekFrom::Start(0))?;
            writeln!(file, "{}", std::process::id())?;
            file.flush()
        };
        record(&mut file).map_err(|e| cannot("write", e))?;
        Ok(Self {
            file: Mutex::new(Some(file)),
            path,
        })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Releases the lock now (the store was closed); later calls do nothing.
    pub fn release(&self) {
        // Closing the file descriptor releases the flock.
        drop(self.file.lock().unwrap_or_else(|p| p.into_inner()).take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_is_refused_naming_file_and_pid_and_release_frees_it() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("tasks.db");
        let first = StoreLock::acquire(&db).unwrap();
        assert_eq!(
            std::fs::read_to_string(first.path()).unwrap().trim(),
            std::process::id().to_string()
        );
        // A second open file description conflicts even inside one process.
        let err = StoreLock::acquire(&db).unwrap_err().to_string();
        assert!(
            err.contains("tasks.db")
                && err.contains(&format!("pid {}", std::process::id()))
                && err.contains("tasks.db.lock"),
            "{err}"
        );
        first.release();
        let again = StoreLock::acquire(&db).unwrap();
        drop(again);
        StoreLock::acquire(&db).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn every_path_to_one_database_names_one_lock_file() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("tasks.db");
        std::fs::write(&db, b"").unwrap();
        let link = dir.path().join("link.db");
        std::os::unix::fs::symlink(&db, &link).unwrap();
        assert_eq!(lock_path(&db), lock_path(&link));
        let _held = StoreLock::acquire(&link).unwrap();
        assert!(StoreLock::acquire(&db).is_err());
    }
}
