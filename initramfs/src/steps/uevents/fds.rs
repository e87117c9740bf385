//! The named descriptors of a scenario: `open`, `close`, `dup`, `dup2`, and the descriptors an
//! `exec_agent` keeps across the exec (made inheritable before it, adopted by the new image).

use super::*;

impl UserEvents {
    /// The number of the descriptor named `name` (`data` opens first), made to survive an
    /// exec (FD_CLOEXEC cleared), for `exec_agent`'s `keep`.
    pub fn inherit(&self, name: &str) -> Result<RawFd, String> {
        let fd = self.fd(name)?;
        // SAFETY: F_SETFD on a descriptor this state owns.
        if unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } < 0 {
            return Err(errno_text(errno()));
        }
        Ok(fd)
    }

    /// Takes the descriptor `fd` an exec left open under the name `name` (close-on-exec again).
    pub fn adopt(&self, name: &str, fd: RawFd) -> Result<(), String> {
        // SAFETY: F_SETFD only sets a flag; on a number that is not open it fails with EBADF.
        if unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } < 0 {
            return Err(errno_text(errno()));
        }
        // SAFETY: a descriptor the exec left open for this image, named by nothing else.
        let file = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        self.names().fds.insert(name.to_string(), file);
        Ok(())
    }

    pub fn open(&self, name: &str, path: &str, read_only: bool, expect: &Expect, say: &mut dyn FnMut(&str)) -> Done {
        let mode = if read_only { "read-only" } else { "read-write" };
        let what = format!("open {path} {mode} as fd {name}");
        let c_path = std::ffi::CString::new(path).map_err(|e| format!("{what}: {e}"))?;
        let flags = libc::O_CLOEXEC | if read_only { libc::O_RDONLY } else { libc::O_RDWR };
        // openat(2) alone inside `around` (a `fail_nth` may arm it): the path is made before,
        // and the errno is read inside, since `around`'s own calls after it would overwrite it.
        let (fd, err) = crate::steps::faults::around(|| {
            // SAFETY: a NUL-terminated path that outlives the call.
            let fd = unsafe { libc::open(c_path.as_ptr(), flags) };
            (fd, if fd < 0 { errno() } else { 0 })
        });
        let result = if fd >= 0 {
            // SAFETY: a descriptor the call just opened, owned by nothing else.
            let file = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
            // A name opened again replaces (and closes) the earlier descriptor.
            self.names().fds.insert(name.to_string(), file);
            Ok(0)
        } else {
            Err(err)
        };
        Ok(check_result(&what, &result_text(result), result, expect, say))
    }

    /// `Step::Dup`: `to` names a duplicate of `name`'s descriptor (a name taken replaces, and
    /// closes, the earlier descriptor).
    pub fn dup(&self, name: &str, to: &str, say: &mut dyn FnMut(&str)) -> Done {
        let what = format!("dup fd {name} as {to}");
        let mut names = self.names();
        let fd = names.fd(name, &self.data_path).map_err(|e| format!("{what}: {e}"))?;
        // SAFETY: F_DUPFD_CLOEXEC on a descriptor this state owns; the result is checked.
        let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
        if new < 0 {
            say(&format!("{what}: {}", errno_text(errno())));
            return Ok(StepOutcome::Fail);
        }
        // SAFETY: a descriptor the call just made, owned by nothing else.
        let file = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(new) };
        names.fds.insert(to.to_string(), file);
        say(&format!("{what}: ok"));
        Ok(StepOutcome::Pass)
    }

    /// `dup2(2)` of the descriptor named `name` onto `number`; on success the new descriptor
    /// (close-on-exec) is kept under `to`, and a name that held `number` is forgotten (the
    /// kernel closed its descriptor).
    pub fn dup2(&self, name: &str, number: i32, to: Option<&str>, expect: &Expect, say: &mut dyn FnMut(&str)) -> Done {
        let what = format!("dup2 fd {name} onto {number}");
        let mut names = self.names();
        let fd = names.fd(name, &self.data_path).map_err(|e| format!("{what}: {e}"))?;
        // SAFETY: dup2 on a descriptor this state owns; a descriptor at `number` is closed by
        // the kernel, and any name that held it is forgotten below without closing it again.
        let r = unsafe { libc::dup2(fd, number) };
        let result = if r < 0 { Err(errno()) } else { Ok(i64::from(r)) };
        let outcome = check_result(&what, &result_text(result), result, expect, say);
        if r < 0 || r == fd {
            if let (Some(to), true) = (to, r == fd) {
                say(&format!("{what}: the descriptor's own number: `{to}` would name it twice"));
                return Ok(StepOutcome::Fail);
            }
            return Ok(outcome);
        }
        // SAFETY: F_SETFD on the descriptor the call just made.
        unsafe { libc::fcntl(r, libc::F_SETFD, libc::FD_CLOEXEC) };
        let gone: Vec<String> = names.fds.iter().filter(|(_, f)| f.as_raw_fd() == r).map(|(n, _)| n.clone()).collect();
        for n in gone {
            if let Some(f) = names.fds.remove(&n) {
                let _ = f.into_raw_fd();
                say(&format!("{what}: fd {n} was {r}: the kernel closed it, the name is gone"));
            }
        }
        if let Some(to) = to {
            // SAFETY: a descriptor the call just made, owned by nothing else now.
            let file = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(r) };
            names.fds.insert(to.to_string(), file);
        }
        Ok(outcome)
    }

    pub fn close(&self, name: &str, say: &mut dyn FnMut(&str)) -> Done {
        let fd = self.names().fds.remove(name).ok_or_else(|| format!("close fd {name}: no such fd"))?;
        // SAFETY: the descriptor is ours and is no longer kept anywhere.
        let r = unsafe { libc::close(fd.into_raw_fd()) };
        let result = if r == 0 { Ok(0) } else { Err(errno()) };
        say(&format!("close fd {name}: {}", result_text(result)));
        Ok(if r == 0 { StepOutcome::Pass } else { StepOutcome::Fail })
    }
}
