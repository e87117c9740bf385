//! What the guest clients share: errno names both ways and the one-line report format.

/// The errno names a client reports or a scenario may expect, with their numbers on this target.
const ERRNOS: &[(&str, i32)] = &[
    ("EPERM", libc::EPERM),
    ("ENOENT", libc::ENOENT),
    ("EINTR", libc::EINTR),
    ("EIO", libc::EIO),
    ("E2BIG", libc::E2BIG),
    ("ENOEXEC", libc::ENOEXEC),
    ("EBADF", libc::EBADF),
    ("EAGAIN", libc::EAGAIN),
    ("ENOMEM", libc::ENOMEM),
    ("EACCES", libc::EACCES),
    ("EFAULT", libc::EFAULT),
    ("EBUSY", libc::EBUSY),
    ("EEXIST", libc::EEXIST),
    ("ENODEV", libc::ENODEV),
    ("EINVAL", libc::EINVAL),
    ("EMFILE", libc::EMFILE),
    ("ENOTTY", libc::ENOTTY),
    ("ENOSPC", libc::ENOSPC),
    ("ENOSYS", libc::ENOSYS),
    ("EOPNOTSUPP", libc::EOPNOTSUPP),
    ("EADDRINUSE", libc::EADDRINUSE),
    ("EALREADY", libc::EALREADY),
];

/// `ENOTTY` for 25; `errno 600` for a number without a name here.
pub fn errno_name(errno: i32) -> String {
    match ERRNOS.iter().find(|(_, n)| *n == errno) {
        Some((name, _)) => (*name).to_string(),
        None => format!("errno {errno}"),
    }
}

/// The number for a name in the table (`ENOTTY` -> 25).
pub fn errno_from_name(name: &str) -> Option<i32> {
    ERRNOS.iter().find(|(n, _)| *n == name).map(|(_, e)| *e)
}

/// The calling thread's last errno (0 if none).
pub fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// A result as the clients print it: `ok` for 0, else the errno's name.
pub fn outcome(errno: i32) -> String {
    if errno == 0 {
        "ok".into()
    } else {
        errno_name(errno)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for (name, n) in ERRNOS {
            assert_eq!(errno_from_name(name), Some(*n));
            assert_eq!(errno_name(*n), *name);
        }
        assert_eq!(errno_name(600), "errno 600");
        assert_eq!(errno_from_name("ENOPE"), None);
        assert_eq!(outcome(0), "ok");
        assert_eq!(outcome(libc::ENOTTY), "ENOTTY");
    }
}
