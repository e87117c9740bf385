//! The user_events steps: descriptors, the `DIAG_IOCS*` ioctls and their raw overrides, writes of
//! events, and the seeded `fuzz` stream of them.

use serde::{Deserialize, Serialize};

use super::defaults::{data_fd, four};
use crate::expect::Expect;
use crate::value::Value;

/// Opens a file and keeps the descriptor under a name. The name `data` is opened on
/// `/sys/kernel/tracing/user_events_data` (read-write) by the first step that uses it.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Open {
    pub fd: String,
    pub path: String,
    #[serde(default)]
    pub read_only: bool,
    #[serde(default)]
    pub expect: Expect,
}

#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Close {
    pub fd: String,
}

/// dup(2) of the descriptor named `fd` (`data` opens by itself first), kept under the name
/// `to` (close-on-exec, as every descriptor of the agent): the same open file, so one
/// file's write indexes and references, whichever name a step uses. Closing one name
/// leaves the other open.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dup {
    #[serde(default = "data_fd")]
    pub fd: String,
    pub to: String,
}

/// dup2(2) of the descriptor named `fd` (`data` opens by itself first) onto the descriptor
/// number `number`, which the kernel closes first when it is open (a descriptor another name
/// held is then gone, and so is that name). `expect` judges the call: on success it returns
/// `number`. The new descriptor is kept under the name `to` when one is given (made
/// close-on-exec afterwards, as every descriptor of the agent): the same open file as `fd`, as
/// `dup`'s. 0, 1 and 2 are refused: they carry the scenario's lines.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dup2 {
    #[serde(default = "data_fd")]
    pub fd: String,
    pub number: i32,
    #[serde(default)]
    pub to: Option<String>,
    #[serde(default)]
    pub expect: Expect,
}

/// `ioctl(fd, DIAG_IOCSREG, &struct user_reg)`. `word` names an enable word in the
/// scenario's memory (made on first use, zeroed, 8-byte aligned); `raw` overrides any
/// field of the struct as sent, for malformed input. On success the returned
/// `write_index` is kept under `index_as`.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Register {
    #[serde(default = "data_fd")]
    pub fd: String,
    pub format: String,
    #[serde(default)]
    pub word: Option<String>,
    #[serde(default)]
    pub bit: u8,
    #[serde(default = "four")]
    pub size: u8,
    #[serde(default)]
    pub flags: u16,
    #[serde(default)]
    pub index_as: Option<String>,
    /// On success, the `write_index` the kernel must have returned.
    #[serde(default)]
    pub expect_index: Option<u32>,
    #[serde(default)]
    pub raw: RawReg,
    /// Exactly this many minor page faults counted to the calling thread during the
    /// ioctl (`getrusage(RUSAGE_THREAD)`): the kernel's fault-ins of the enable word
    /// (`fixup_user_fault()` in the caller's context) count there.
    #[serde(default)]
    pub minor_faults: Option<u64>,
    #[serde(default)]
    pub expect: Expect,
}

/// `ioctl(fd, DIAG_IOCSUNREG, &struct user_unreg)` for `word`'s address and `bit`.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Unregister {
    #[serde(default = "data_fd")]
    pub fd: String,
    #[serde(default)]
    pub word: Option<String>,
    #[serde(default)]
    pub bit: u8,
    #[serde(default)]
    pub raw: RawUnreg,
    /// As `register`'s: the minor page faults of the calling thread during the ioctl.
    #[serde(default)]
    pub minor_faults: Option<u64>,
    #[serde(default)]
    pub expect: Expect,
}

/// `ioctl(fd, DIAG_IOCSDEL, name)`. With `within_ms`, retried every millisecond while the
/// result differs from `expect` (references dropped at exit or unregister go away only
/// after an RCU grace period); the retries are counted and said.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Delete {
    #[serde(default = "data_fd")]
    pub fd: String,
    pub name: String,
    #[serde(default)]
    pub expect: Expect,
    #[serde(default)]
    pub within_ms: u64,
    /// Then check that the event's folder, `events/user_events/NAME`, agrees with the
    /// result: gone after `0` (the removal is synchronous) or `ENOENT`, still there after
    /// `EBUSY`. For a persistent single-format event, which nothing else removes.
    #[serde(default)]
    pub confirm: bool,
    /// Send `name`'s bytes without a NUL, as the last bytes of a page that an unmapped page
    /// follows: the kernel's copy of the name runs into the hole.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unterminated: bool,
}

/// `ioctl(fd, cmd, arg)` with any command and argument, for what `register`, `unregister` and
/// `delete` cannot send: a command the descriptor does not know, a known command with a bare
/// integer or a bad address instead of its struct or name, an ioctl on another file (such as
/// `user_events_status`). `expect` judges the return value.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ioctl {
    #[serde(default = "data_fd")]
    pub fd: String,
    pub cmd: IoctlCmd,
    /// The argument (default `value: 0`).
    #[serde(default)]
    pub arg: IoctlArg,
    #[serde(default)]
    pub expect: Expect,
}

/// An ioctl command: a number (the kernel takes 32 bits), or a user_events command by its
/// name, whose number the agent computes for its architecture (it holds the size of a
/// pointer).
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum IoctlCmd {
    Number(u64),
    Named(DiagCmd),
}

/// The user_events ioctl commands by name.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DiagCmd {
    #[serde(rename = "DIAG_IOCSREG")]
    Reg,
    #[serde(rename = "DIAG_IOCSDEL")]
    Del,
    #[serde(rename = "DIAG_IOCSUNREG")]
    Unreg,
}

/// An `ioctl` step's argument: an address as the `raw` overrides give one, an integer, or
/// bytes in a buffer whose address is passed.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum IoctlArg {
    /// Address 0.
    NullPointer,
    /// An address in the kernel half (fails `access_ok`).
    Kernel,
    /// A page that was mapped and unmapped again.
    Unmapped,
    /// A mapped, read-only page of zeros.
    ReadOnly,
    /// A fresh anonymous page never touched.
    Fresh,
    /// This integer, passed as it is.
    Value(u64),
    /// These bytes in a writable buffer of their length (at most 64 KiB), whose address is
    /// passed.
    Bytes(Vec<u8>),
}

impl Default for IoctlArg {
    fn default() -> Self {
        IoctlArg::Value(0)
    }
}

/// The most bytes an `ioctl` step's `bytes` argument holds.
pub const MAX_IOCTL_BYTES: usize = 64 * 1024;

/// Registers `format` with `{i}` replaced by 0, 1, 2, ... until one registration fails,
/// which must fail as `expect` says (an errno); reaching `max` registrations without a
/// failure fails the step. Each registration is unregistered at once and the events are
/// spread over fresh `user_events_data` descriptors, which keep them alive until the
/// scenario's process exits (they are not persistent).
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegisterUntil {
    pub format: String,
    pub max: u32,
    pub expect: Expect,
    /// Leave the events to the reboot: a holder process in a session of its own keeps the
    /// descriptors open after the scenario ends, so the kernel never tears the events down
    /// (which for tens of thousands takes minutes and holds up the reboot). Only for an
    /// `isolated` scenario, the last in its boot.
    #[serde(default)]
    pub hold_until_reboot: bool,
}

/// `write()` (or `writev()` with one iovec per field when `vectored`) of the write index
/// (`index`: a name from `index_as`, or `index_value`) followed by the fields.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Write {
    #[serde(default = "data_fd")]
    pub fd: String,
    #[serde(default)]
    pub index: Option<String>,
    #[serde(default)]
    pub index_value: Option<u32>,
    #[serde(default)]
    pub fields: Vec<Value>,
    #[serde(default)]
    pub vectored: bool,
    /// `pwrite()` / `pwritev()` at this file offset instead of `write()` / `writev()`.
    #[serde(default)]
    pub offset: Option<i64>,
    /// Take the payload after the index from this address instead of the fields' bytes
    /// (as many bytes as the fields encode to): `unmapped`, `kernel`, `null_pointer`, or
    /// `fresh` / `read_only`, a never-touched page of zeros the write must fault in.
    #[serde(default)]
    pub payload_from: Option<Addr>,
    #[serde(default)]
    pub expect: Expect,
}

/// A bounded, seeded stream of random registrations, writes, enables, unregisters and
/// deletes on its own `user_events_data` descriptor; fails if any call ends in an errno the
/// ABI does not document. Kernel health is judged from the console as for every step.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fuzz {
    pub seed: u64,
    pub iterations: u32,
}

/// The descriptor name opened on `user_events_data` on first use.
pub const DATA_FD: &str = "data";

pub const USER_EVENTS_DATA: &str = "/sys/kernel/tracing/user_events_data";

/// Overrides of `struct user_reg` fields as sent to the kernel (unset fields keep the
/// values the step's other fields give).
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawReg {
    /// The ioctl command number (default `DIAG_IOCSREG`).
    #[serde(default)]
    pub cmd: Option<u64>,
    /// The `size` field (default 28).
    #[serde(default)]
    pub size: Option<u32>,
    #[serde(default)]
    pub enable_bit: Option<u8>,
    #[serde(default)]
    pub enable_size: Option<u8>,
    #[serde(default)]
    pub flags: Option<u16>,
    #[serde(default)]
    pub enable_addr: Option<Addr>,
    #[serde(default)]
    pub name_args: Option<Addr>,
    /// Bytes sent after the 28-byte struct (the kernel accepts a larger `size` only when
    /// they are zero); zeros follow them up to `size` (at most 64 KiB are sent).
    #[serde(default)]
    pub tail: Vec<u8>,
    /// Pass this pointer as the ioctl argument instead of the struct.
    #[serde(default)]
    pub arg: Option<Addr>,
}

/// Overrides of `struct user_unreg` fields.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawUnreg {
    #[serde(default)]
    pub cmd: Option<u64>,
    #[serde(default)]
    pub size: Option<u32>,
    #[serde(default)]
    pub reserved: Option<u8>,
    #[serde(default)]
    pub reserved2: Option<u16>,
    #[serde(default)]
    pub disable_addr: Option<Addr>,
    /// Bytes sent after the 16-byte struct (the kernel accepts a larger `size` only when
    /// they are zero); zeros follow them up to `size` (at most 64 KiB are sent).
    #[serde(default)]
    pub tail: Vec<u8>,
    /// Pass this pointer as the ioctl argument instead of the struct.
    #[serde(default)]
    pub arg: Option<Addr>,
}

/// A user address for malformed input.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Addr {
    /// Address 0 (`null_pointer` in YAML, where a bare `null` means "not given").
    NullPointer,
    /// An address in the kernel half (fails `access_ok`).
    Kernel,
    /// A page that was mapped and unmapped again.
    Unmapped,
    /// A mapped, read-only page.
    ReadOnly,
    /// A fresh anonymous page never touched (registration must fault it in).
    Fresh,
    /// The step's enable word plus a byte offset (misalignment).
    WordOffset(i64),
    /// A literal address.
    Value(u64),
}
