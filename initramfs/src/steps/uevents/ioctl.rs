//! The `ioctl` step: any command with any argument on a named descriptor, for what
//! `register`, `unregister` and `delete` cannot send.

use protocol::steps::{DiagCmd, IoctlArg, IoctlCmd};

use super::*;

/// The number of an `ioctl` step's command on this architecture.
pub fn cmd_number(cmd: &IoctlCmd) -> u64 {
    match cmd {
        IoctlCmd::Number(n) => *n,
        IoctlCmd::Named(DiagCmd::Reg) => DIAG_IOCSREG,
        IoctlCmd::Named(DiagCmd::Del) => DIAG_IOCSDEL,
        IoctlCmd::Named(DiagCmd::Unreg) => DIAG_IOCSUNREG,
    }
}

/// `DIAG_IOCSDEL 0x40082a01`, `0x2a63`: a command as asked and as sent.
fn cmd_text(cmd: &IoctlCmd, number: u64) -> String {
    match cmd {
        IoctlCmd::Number(_) => format!("{number:#x}"),
        IoctlCmd::Named(DiagCmd::Reg) => format!("DIAG_IOCSREG {number:#x}"),
        IoctlCmd::Named(DiagCmd::Del) => format!("DIAG_IOCSDEL {number:#x}"),
        IoctlCmd::Named(DiagCmd::Unreg) => format!("DIAG_IOCSUNREG {number:#x}"),
    }
}

impl UserEvents {
    /// `Step::Ioctl`: the call, judged by `expect`.
    pub fn ioctl(&self, fd: &str, cmd: &IoctlCmd, arg: &IoctlArg, expect: &Expect, say: &mut dyn FnMut(&str)) -> Done {
        let number = cmd_number(cmd);
        let mut what = format!("ioctl fd {fd} cmd {}", cmd_text(cmd, number));
        let mut names = self.names();
        let raw_fd = names.fd(fd, &self.data_path).map_err(|e| format!("{what}: {e}"))?;
        let addr = match arg {
            IoctlArg::NullPointer => Some(Addr::NullPointer),
            IoctlArg::Kernel => Some(Addr::Kernel),
            IoctlArg::Unmapped => Some(Addr::Unmapped),
            IoctlArg::ReadOnly => Some(Addr::ReadOnly),
            IoctlArg::Fresh => Some(Addr::Fresh),
            IoctlArg::Value(_) | IoctlArg::Bytes(_) => None,
        };
        let slot = addr.as_ref().map(|a| names.scratch.resolve(a, 0)).transpose()?;
        drop(names);
        let mut buf = match arg {
            IoctlArg::Bytes(bytes) => bytes.clone(),
            _ => Vec::new(),
        };
        let hole = memory::hole_for(&[slot])?;
        // From here to the ioctl nothing allocates: the hole must stay a hole.
        let value = match (arg, slot) {
            (IoctlArg::Value(v), _) => *v,
            (IoctlArg::Bytes(_), _) => buf.as_mut_ptr() as u64,
            (_, Some(slot)) => slot.or_hole(hole),
            (_, None) => 0,
        };
        let result = ioctl(raw_fd, number, value);
        match (arg, &addr) {
            (IoctlArg::Value(v), _) => what.push_str(&format!(" arg {v:#x}")),
            (IoctlArg::Bytes(_), _) => what.push_str(&format!(" arg bytes {}", hex_parts(&[buf]))),
            (_, Some(a)) => what.push_str(&format!(" arg {}", addr_text(a, value))),
            (_, None) => {}
        }
        Ok(check_result(&what, &result_text(result), result, expect, say))
    }
}
