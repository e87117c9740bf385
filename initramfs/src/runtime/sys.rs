//! Thin wrappers over the system calls the agent needs (mount, reboot, process groups,
//! reaping) and errno names for messages.

use std::ffi::CString;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Duration;

/// A message for a human on the console (PID 1's stderr is `/dev/console`).
pub fn console(msg: &str) {
    // Never panic over a console write: as PID 1 a panic ends the boot.
    let _ = writeln!(io::stderr(), "{msg}");
}

/// `ENOENT` for 2, `errno 600` for numbers without a name here.
pub fn errno_name(errno: i32) -> String {
    let name = match errno {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::ESRCH => "ESRCH",
        libc::EINTR => "EINTR",
        libc::EIO => "EIO",
        libc::ENXIO => "ENXIO",
        libc::E2BIG => "E2BIG",
        libc::ENOEXEC => "ENOEXEC",
        libc::EBADF => "EBADF",
        libc::ECHILD => "ECHILD",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::EXDEV => "EXDEV",
        libc::ENODEV => "ENODEV",
        libc::ENOTDIR => "ENOTDIR",
        libc::EISDIR => "EISDIR",
        libc::EINVAL => "EINVAL",
        libc::ENFILE => "ENFILE",
        libc::EMFILE => "EMFILE",
        libc::ENOTTY => "ENOTTY",
        libc::ETXTBSY => "ETXTBSY",
        libc::EFBIG => "EFBIG",
        libc::ENOSPC => "ENOSPC",
        libc::ESPIPE => "ESPIPE",
        libc::EROFS => "EROFS",
        libc::EMLINK => "EMLINK",
        libc::EPIPE => "EPIPE",
        libc::EDOM => "EDOM",
        libc::ERANGE => "ERANGE",
        libc::EDEADLK => "EDEADLK",
        libc::ENAMETOOLONG => "ENAMETOOLONG",
        libc::ENOSYS => "ENOSYS",
        libc::ENOTEMPTY => "ENOTEMPTY",
        libc::ELOOP => "ELOOP",
        libc::ENODATA => "ENODATA",
        libc::EOVERFLOW => "EOVERFLOW",
        libc::EILSEQ => "EILSEQ",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::EADDRINUSE => "EADDRINUSE",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::EALREADY => "EALREADY",
        libc::EINPROGRESS => "EINPROGRESS",
        // Kernel-internal, but it does leak to user space from some drivers.
        524 => "ENOTSUPP",
        _ => return format!("errno {errno}"),
    };
    name.to_string()
}

/// The errno name of an I/O error, or its text when it did not come from the kernel.
pub fn error_name(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(errno) => errno_name(errno),
        None => e.to_string(),
    }
}

fn cstring(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

pub fn mount(source: &str, target: &Path, fstype: &str) -> io::Result<()> {
    let source = CString::new(source).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let fstype = CString::new(fstype).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let target = cstring(target)?;
    // SAFETY: all pointers are NUL-terminated strings that outlive the call.
    let r = unsafe { libc::mount(source.as_ptr(), target.as_ptr(), fstype.as_ptr(), 0, std::ptr::null()) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Syncs and reboots; with QEMU's `-no-reboot` this ends the VM. Never returns.
pub fn reboot() -> ! {
    // Only the host-backed file systems hold data that must survive: syncfs each virtio-fs
    // mount. A global sync() also waits on every other file system, and was seen to block for
    // minutes while the kernel tore down 65k user events after a scenario.
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    for mount_point in mounts.lines().filter_map(|l| {
        let f: Vec<&str> = l.split(' ').collect();
        (f.len() > 2 && f[2] == "virtiofs").then(|| f[1].to_string())
    }) {
        if let Ok(dir) = std::fs::File::open(&mount_point) {
            // SAFETY: syncfs on a descriptor we own.
            unsafe { libc::syncfs(std::os::fd::AsRawFd::as_raw_fd(&dir)) };
        }
    }
    // SAFETY: a plain system call without pointers.
    unsafe { libc::reboot(libc::RB_AUTOBOOT) };
    console(&format!("ue-agent: reboot failed: {}", error_name(&io::Error::last_os_error())));
    // SAFETY: as above. Returning from PID 1 would panic the kernel, so power off or idle.
    unsafe { libc::reboot(libc::RB_POWER_OFF) };
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// SIGKILL to every process in the group `pgid`; a group already gone is fine.
pub fn kill_group(pgid: u32) {
    // SAFETY: kill has no memory effects.
    unsafe { libc::kill(-(pgid as libc::pid_t), libc::SIGKILL) };
}

/// Whether child `pid` has exited, without reaping it: while the zombie stays, its pid and
/// process group id cannot be reused, so killing the group afterwards is race-free.
pub fn has_exited(pid: u32) -> bool {
    // SAFETY: siginfo_t is plain data; waitid writes into it.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
    let r = unsafe { libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, flags) };
    if r != 0 {
        // ECHILD: someone reaped it already, so it has certainly exited.
        return io::Error::last_os_error().raw_os_error() != Some(libc::EINTR);
    }
    // SAFETY: si_pid is valid for SIGCHLD-style siginfo, which waitid fills (or leaves zeroed).
    unsafe { info.si_pid() != 0 }
}

/// Reaps every exited child, whoever it was: orphans are reparented to PID 1.
pub fn reap_zombies() {
    loop {
        let mut status = 0;
        // SAFETY: status is a valid out pointer.
        if unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) } <= 0 {
            break;
        }
    }
}

/// The calling thread's minor page faults so far (`getrusage(RUSAGE_THREAD)`'s `ru_minflt`),
/// which count the kernel's fault-ins on the thread's behalf too (`fixup_user_fault()`).
pub fn thread_minor_faults() -> u64 {
    // SAFETY: an all-zero rusage is valid, and getrusage only writes it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: usage is a valid out pointer; RUSAGE_THREAD exists on every kernel since 2.6.26.
    let r = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    assert_eq!(r, 0, "getrusage(RUSAGE_THREAD) cannot fail with a valid pointer");
    usage.ru_minflt as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A page touched for the first time is one more minor fault of this thread, and
    /// nothing else in between adds any.
    #[test]
    fn the_thread_minor_faults_count_a_first_touch() {
        // SAFETY: a fresh private anonymous page, unmapped below.
        let page = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(page, libc::MAP_FAILED);
        let before = thread_minor_faults();
        // SAFETY: the page is mapped and writable.
        unsafe { std::ptr::write_volatile(page as *mut u8, 1) };
        let after = thread_minor_faults();
        // SAFETY: mapped above, not used after.
        unsafe { libc::munmap(page, 4096) };
        assert_eq!(after - before, 1);
    }

    #[test]
    fn errno_names() {
        assert_eq!(errno_name(libc::ENOENT), "ENOENT");
        assert_eq!(errno_name(524), "ENOTSUPP");
        assert_eq!(errno_name(4000), "errno 4000");
        assert_eq!(error_name(&io::Error::from_raw_os_error(libc::EINVAL)), "EINVAL");
    }
}
