//! The `measure` step: one figure about user_events itself (write throughput with and without
//! consumers, the disabled path, registration, enable propagation, fork against enablers),
//! measured as `reps` repetitions interleaved with the figure's baseline, and reported as
//! `ue-metric` lines (the median, and the ratio to the baseline, each with its samples).
//!
//! Everything here is real: the event is registered on `user_events_data`, ftrace is enabled
//! through the event's `enable` file, perf samples into a mapped ring buffer the loop drains
//! after every write, and the baselines are the same calls on `/dev/null` and `getppid()`.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use protocol::{median, Consumers, MeasureKind, Metric, MIN_REPS};

use crate::steps::outcome::{errno, errno_text, ioctl, StepOutcome};
use crate::steps::uevents::DIAG_IOCSDEL;

mod clock;
mod ring;

pub use clock::clock_tick;
use clock::{FineClock, Timer};
use ring::Ring;

/// The largest fixed `char[N]` field the kernel accepts (MAX_FIELD_ARRAY_SIZE); bigger payloads
/// are split over several fields of at most this size.
const FIELD_CHUNK: u32 = 1024;
/// How long a bit may take to show an enable change before the step gives up.
const PROPAGATION_LIMIT: Duration = Duration::from_secs(1);
const TRACEFS: &str = "/sys/kernel/tracing";
/// The most fresh events one repetition of `register` makes.
const REGISTER_SLOTS: usize = 4096;

/// What a `measure` step asks for.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub name: &'a str,
    pub what: MeasureKind,
    pub payload: u32,
    pub consumers: Consumers,
    pub vectored: bool,
    pub enablers: u32,
    pub reps: u32,
    pub duration: Duration,
}

/// The unit of a figure, whether more is better, and whether it is a rate (per second) rather
/// than a cost (per operation).
fn unit_of(what: MeasureKind) -> (&'static str, bool) {
    match what {
        MeasureKind::Write => ("events/s", true),
        MeasureKind::NullWrite => ("writes/s", true),
        MeasureKind::Syscall => ("calls/s", true),
        MeasureKind::EnableCheck => ("ns", false),
        MeasureKind::Register | MeasureKind::EnablePropagation | MeasureKind::Fork => ("us", false),
    }
}

/// A per-operation cost in ns as the figure's unit.
fn in_unit(what: MeasureKind, ns_per_op: f64) -> f64 {
    match unit_of(what) {
        (_, true) => 1e9 / ns_per_op,
        ("us", _) => ns_per_op / 1e3,
        _ => ns_per_op,
    }
}

/// The median absolute deviation from the median (`protocol::median`, the figures' own).
pub fn mad(samples: &[f64]) -> f64 {
    let m = median(samples);
    median(&samples.iter().map(|v| (v - m).abs()).collect::<Vec<_>>())
}

/// Runs the step; the figure and its ratio go out as `ue-metric` lines on stdout.
pub fn run(req: &Request, say: &mut dyn FnMut(&str)) -> StepOutcome {
    let what = format!("measure {}", req.name);
    if req.reps < MIN_REPS {
        say(&format!("{what}: {} repetitions; a figure needs at least {MIN_REPS}", req.reps));
        return StepOutcome::Fail;
    }
    let mut bench = Bench::new(req);
    let result = bench.measure(req);
    let cleanup = bench.teardown();
    let note = std::mem::take(&mut bench.note);
    let (figure, ratio) = match result {
        Ok(r) => r,
        Err(e) => {
            say(&format!("{what}: {e}"));
            return StepOutcome::Fail;
        }
    };
    if let Err(e) = cleanup {
        say(&format!("{what}: cleanup: {e}"));
    }
    if !(figure.value.is_finite() && figure.value > 0.0) {
        say(&format!("{what}: the figure is {}, not a positive number", figure.value));
        return StepOutcome::Fail;
    }
    let spread = |m: &Metric| {
        let lo = m.samples.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = m.samples.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        format!(
            "{:.4} {} (min {lo:.4}, max {hi:.4}, MAD {:.4}, n={})",
            m.value,
            m.unit,
            mad(&m.samples),
            m.samples.len()
        )
    };
    let mut text = format!("{what}: {}", spread(&figure));
    if let Some(r) = &ratio {
        text.push_str(&format!("; cost {} the baseline", spread(r)));
    }
    text.push_str(&note);
    say(&text);
    let mut out = io::stdout().lock();
    for m in std::iter::once(&figure).chain(ratio.as_ref()) {
        let _ = writeln!(out, "{}{}", protocol::METRIC_PREFIX, m.body());
    }
    let _ = out.flush();
    StepOutcome::Pass
}

/// The resources one measurement holds, released by [`Bench::teardown`] whatever happened.
struct Bench {
    event: String,
    data: Option<OwnedFd>,
    null: Option<File>,
    /// Enable words: one u32 per enabler (the measured event's is the first), never moved.
    words: Vec<u32>,
    registered: Vec<usize>,
    ftrace_on: bool,
    perf: Option<Ring>,
    /// Events `register` made, to delete.
    extra_events: Vec<String>,
    timer: Timer,
    clock: FineClock,
    /// Side figures for the step's line (not metrics), and what to say about them.
    notes: Vec<f64>,
    note: String,
}

impl Bench {
    fn new(req: &Request) -> Bench {
        let event: String =
            format!("ue_m_{}", req.name).chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
        // Registration latency needs a word per fresh event; fork one per enabler.
        let slots = if req.what == MeasureKind::Register { REGISTER_SLOTS } else { req.enablers.max(1) as usize + 1 };
        let words = vec![0u32; slots];
        let tick = clock_tick();
        Bench {
            event,
            data: None,
            null: None,
            words,
            registered: vec![],
            ftrace_on: false,
            perf: None,
            extra_events: vec![],
            timer: Timer { tick },
            clock: if req.what == MeasureKind::EnablePropagation {
                FineClock::new(tick)
            } else {
                FineClock::new(Duration::ZERO)
            },
            notes: vec![],
            note: String::new(),
        }
    }

    fn data_fd(&mut self) -> Result<RawFd, String> {
        if self.data.is_none() {
            self.data = Some(open_data()?);
        }
        Ok(self.data.as_ref().expect("just opened").as_raw_fd())
    }

    fn word_addr(&self, slot: usize) -> u64 {
        &self.words[slot] as *const u32 as u64
    }

    /// Registers `format` on word `slot`, bit 0; the write index.
    fn register(&mut self, format: &str, slot: usize) -> Result<u32, String> {
        let fd = self.data_fd()?;
        let index = register(fd, format, self.word_addr(slot))?;
        self.registered.push(slot);
        Ok(index)
    }

    fn unregister(&mut self, slot: usize) -> Result<(), String> {
        let fd = self.data_fd()?;
        self.registered.retain(|s| *s != slot);
        unregister(fd, self.word_addr(slot))
    }

    fn enable_file(&self) -> String {
        format!("{TRACEFS}/events/user_events/{}/enable", self.event)
    }

    fn set_ftrace(&mut self, on: bool) -> Result<(), String> {
        let path = self.enable_file();
        let f = OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(|e| format!("{path}: {}", crate::runtime::sys::error_name(&e)))?;
        f.write_at(if on { b"1" } else { b"0" }, 0)
            .map_err(|e| format!("{path}: {}", crate::runtime::sys::error_name(&e)))?;
        self.ftrace_on = on;
        Ok(())
    }

    fn teardown(&mut self) -> Result<(), String> {
        let mut errors = vec![];
        if self.ftrace_on {
            errors.extend(self.set_ftrace(false).err());
        }
        self.perf = None;
        for slot in self.registered.clone() {
            errors.extend(self.unregister(slot).err());
        }
        // The descriptor that registered holds a reference to the event until it closes.
        let mut events = std::mem::take(&mut self.extra_events);
        if self.data.take().is_some() {
            events.push(self.event.clone());
        }
        for event in events {
            errors.extend(delete(&event).err());
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }

    /// The figure and, but for `syscall`, its ratio to the baseline.
    fn measure(&mut self, req: &Request) -> Result<(Metric, Option<Metric>), String> {
        let mut costs = vec![];
        let mut base = vec![];
        let t = self.timer;
        match req.what {
            MeasureKind::Syscall => {
                for _ in 0..req.reps {
                    costs.push(t.run(req.duration, getppid)?);
                }
            }
            MeasureKind::NullWrite => {
                let bytes = vec![0x61u8; 4 + req.payload as usize];
                let null = self.null_fd()?;
                for _ in 0..req.reps {
                    base.push(t.run(req.duration, getppid)?);
                    costs.push(t.run(req.duration, || write_once(null, &bytes, req.vectored, None))?);
                }
            }
            MeasureKind::Write => self.writes(req, &mut costs, &mut base)?,
            MeasureKind::EnableCheck => {
                self.register(&self.event.clone(), 0)?;
                let word = &self.words[0] as *const u32;
                let mut seen_set = 0u64;
                for _ in 0..req.reps {
                    base.push(t.run(req.duration, getppid)?);
                    costs.push(t.run(req.duration, || {
                        // SAFETY: the word lives in `self.words`, which is not resized while
                        // registered; the kernel may store to it, hence the volatile read.
                        if unsafe { std::ptr::read_volatile(word) } & 1 != 0 {
                            seen_set += 1;
                        }
                        Ok(())
                    })?);
                }
                if seen_set > 0 {
                    return Err(format!("the enable bit was set {seen_set} times with nothing attached"));
                }
            }
            MeasureKind::Register => {
                for rep in 0..req.reps {
                    base.push(t.run(req.duration, getppid)?);
                    costs.push(self.registrations(rep, req.duration)?);
                }
            }
            MeasureKind::EnablePropagation => {
                self.register(&self.event.clone(), 0)?;
                for _ in 0..req.reps {
                    base.push(t.run(req.duration, getppid)?);
                    let (on, off) = self.propagation(req.duration)?;
                    costs.push(on);
                    self.notes.push(off / 1e3);
                }
                self.note = format!(
                    "; disabling took {:.1} us (median), enabling is timed on {}",
                    median(&self.notes),
                    if self.clock.tsc { "the TSC (the kernel clock is coarse)" } else { "the kernel clock" }
                );
            }
            MeasureKind::Fork => {
                // The baseline is the same fork without enablers, so it runs first.
                for _ in 0..req.reps {
                    base.push(t.run(req.duration, fork_and_wait)?);
                }
                for slot in 0..req.enablers as usize {
                    self.register(&self.event.clone(), slot)?;
                }
                for _ in 0..req.reps {
                    costs.push(t.run(req.duration, fork_and_wait)?);
                }
            }
        }
        let (unit, higher) = unit_of(req.what);
        let samples: Vec<f64> = costs.iter().map(|c| in_unit(req.what, *c)).collect();
        let figure = Metric {
            name: req.name.to_string(),
            value: median(&samples),
            unit: unit.into(),
            higher_is_better: higher,
            samples,
        };
        let ratio = (!base.is_empty()).then(|| {
            let samples: Vec<f64> = costs.iter().zip(&base).map(|(c, b)| c / b).collect();
            Metric {
                name: format!("{}.ratio", req.name),
                value: median(&samples),
                unit: "x".into(),
                higher_is_better: false,
                samples,
            }
        });
        Ok((figure, ratio))
    }

    fn null_fd(&mut self) -> Result<RawFd, String> {
        if self.null.is_none() {
            self.null = Some(OpenOptions::new().write(true).open("/dev/null").map_err(|e| format!("/dev/null: {e}"))?);
        }
        Ok(self.null.as_ref().expect("just opened").as_raw_fd())
    }

    /// Write throughput: the event registered with `payload` bytes of fields, the consumers
    /// attached, writes interleaved with the same writes to /dev/null.
    fn writes(&mut self, req: &Request, costs: &mut Vec<f64>, base: &mut Vec<f64>) -> Result<(), String> {
        let format = event_format(&self.event, req.payload);
        let index = self.register(&format, 0)?;
        if matches!(req.consumers, Consumers::Ftrace | Consumers::FtracePerf) {
            self.set_ftrace(true)?;
        }
        if matches!(req.consumers, Consumers::Perf | Consumers::FtracePerf) {
            self.perf = Some(Ring::open(&self.event)?);
        }
        let attached = req.consumers != Consumers::None;
        // SAFETY: a live word of `self.words`, written by the kernel.
        let bit = unsafe { std::ptr::read_volatile(&self.words[0]) } & 1 != 0;
        if bit != attached {
            // The consumers as the scenario spells them (`ftrace_perf`).
            let consumers = serde_json::to_value(req.consumers).ok().and_then(|v| v.as_str().map(str::to_string));
            let consumers = consumers.unwrap_or_default();
            return Err(format!("the enable bit is {} with consumers {consumers}", u8::from(bit)));
        }
        let mut bytes = index.to_ne_bytes().to_vec();
        bytes.resize(4 + req.payload as usize, 0x61);
        let data = self.data_fd()?;
        let null = self.null_fd()?;
        let ring = self.perf.as_ref();
        let refused = (!attached).then_some(libc::EBADF);
        let t = self.timer;
        for _ in 0..req.reps {
            base.push(t.run(req.duration, || write_once(null, &bytes, req.vectored, None))?);
            costs.push(t.run(req.duration, || {
                write_once(data, &bytes, req.vectored, refused)?;
                if let Some(r) = ring {
                    r.drain();
                }
                Ok(())
            })?);
        }
        if let Some(r) = ring {
            if r.drained() == 0 {
                return Err("perf was attached but received no sample".into());
            }
        }
        Ok(())
    }

    /// One repetition of registration latency: fresh events registered one after another on
    /// a descriptor of their own; then, untimed, unregistered, the descriptor closed (it holds
    /// them) and the events deleted.
    fn registrations(&mut self, rep: u32, duration: Duration) -> Result<f64, String> {
        let fd = open_data()?;
        let base = self.word_addr(1);
        let slots = self.words.len() - 1;
        let mut n = 0usize;
        let result = self.timer.run(duration, || {
            if n == slots {
                return Err(format!("more than {slots} registrations in one repetition: shorten duration_ms"));
            }
            register(fd.as_raw_fd(), &format!("{}_{rep}_{n}", self.event), base + 4 * n as u64)?;
            n += 1;
            Ok(())
        });
        for i in 0..n {
            self.extra_events.push(format!("{}_{rep}_{i}", self.event));
            unregister(fd.as_raw_fd(), base + 4 * i as u64)?;
        }
        drop(fd);
        for event in std::mem::take(&mut self.extra_events) {
            delete(&event)?;
        }
        result
    }

    /// One repetition of enable propagation: `1` written to the enable file and the bit
    /// waited for (timed one by one on the fine clock), then `0` and its clear bit (untimed:
    /// disabling waits for an RCU grace period, which is another figure), until `duration`.
    /// The mean enable time in ns, and the mean disable time.
    fn propagation(&mut self, duration: Duration) -> Result<(f64, f64), String> {
        let path = self.enable_file();
        let f = OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(|e| format!("{path}: {}", crate::runtime::sys::error_name(&e)))?;
        let word = &self.words[0] as *const u32;
        let clock = self.clock;
        let start = Instant::now();
        let (mut on_ns, mut off_ns, mut n) = (0.0, 0.0, 0u32);
        while start.elapsed() < duration || n == 0 {
            for on in [true, false] {
                self.ftrace_on = true;
                let t = clock.now_ns();
                f.write_at(if on { b"1" } else { b"0" }, 0)
                    .map_err(|e| format!("{path}: {}", crate::runtime::sys::error_name(&e)))?;
                let limit = Instant::now() + PROPAGATION_LIMIT;
                // SAFETY: a live word of `self.words`, written by the kernel.
                while (unsafe { std::ptr::read_volatile(word) } & 1 != 0) != on {
                    if Instant::now() > limit {
                        return Err(format!("the bit did not become {} within {PROPAGATION_LIMIT:?}", u8::from(on)));
                    }
                    std::hint::spin_loop();
                }
                let took = clock.now_ns() - t;
                if on {
                    on_ns += took;
                } else {
                    off_ns += took;
                }
            }
            self.ftrace_on = false;
            n += 1;
        }
        Ok((on_ns / f64::from(n), off_ns / f64::from(n)))
    }
}

fn open_data() -> Result<OwnedFd, String> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .open(protocol::USER_EVENTS_DATA)
        .map(OwnedFd::from)
        .map_err(|e| format!("open {}: {}", protocol::USER_EVENTS_DATA, crate::runtime::sys::error_name(&e)))
}

/// `DIAG_IOCSREG` of `format` with bit 0 of the 4-byte word at `addr`; the write index.
fn register(fd: RawFd, format: &str, addr: u64) -> Result<u32, String> {
    crate::steps::uevents::register_bit0(fd, format, addr)
        .map_err(|e| format!("register `{format}`: {}", errno_text(e)))
}

fn unregister(fd: RawFd, addr: u64) -> Result<(), String> {
    crate::steps::uevents::unregister_bit0(fd, addr).map_err(|e| format!("unregister: {}", errno_text(e)))
}

/// Deletes an event on a descriptor of its own (one that holds no reference to it), retrying
/// while the references drop away (an RCU grace period).
fn delete(event: &str) -> Result<(), String> {
    let fd = open_data()?;
    let name = std::ffi::CString::new(event).map_err(|_| format!("`{event}` has a NUL"))?;
    let until = Instant::now() + Duration::from_secs(2);
    loop {
        match ioctl(fd.as_raw_fd(), DIAG_IOCSDEL, name.as_ptr() as u64) {
            Ok(_) | Err(libc::ENOENT) => return Ok(()),
            Err(e) if Instant::now() >= until => return Err(format!("delete {event}: {}", errno_text(e))),
            Err(_) => std::thread::sleep(Duration::from_millis(1)),
        }
    }
}

/// `NAME` for no payload, else `char[N]` fields of at most [`FIELD_CHUNK`] bytes adding up to it.
pub fn event_format(event: &str, payload: u32) -> String {
    let mut fields = vec![];
    let mut left = payload;
    while left > 0 {
        let n = left.min(FIELD_CHUNK);
        fields.push(format!("char[{n}] f{}", fields.len()));
        left -= n;
    }
    if fields.is_empty() {
        event.to_string()
    } else {
        format!("{event} {}", fields.join("; "))
    }
}

fn getppid() -> Result<(), String> {
    // SAFETY: getppid has no preconditions and cannot fail.
    std::hint::black_box(unsafe { libc::getppid() });
    Ok(())
}

/// One `write()` of `bytes`, or a `writev()` with the 4-byte index and the rest apart, which
/// must write everything, or fail with `refused` (EBADF: a disabled event's documented answer).
fn write_once(fd: RawFd, bytes: &[u8], vectored: bool, refused: Option<i32>) -> Result<(), String> {
    // SAFETY: the buffers are live slices of `bytes`, read-only for the kernel.
    let n = unsafe {
        if vectored {
            let (head, tail) = bytes.split_at(4.min(bytes.len()));
            let iov = [
                libc::iovec { iov_base: head.as_ptr() as *mut _, iov_len: head.len() },
                libc::iovec { iov_base: tail.as_ptr() as *mut _, iov_len: tail.len() },
            ];
            libc::writev(fd, iov.as_ptr(), if tail.is_empty() { 1 } else { 2 })
        } else {
            libc::write(fd, bytes.as_ptr().cast(), bytes.len())
        }
    };
    let expected = match refused {
        None => n == bytes.len() as isize,
        Some(errno_wanted) => n < 0 && errno() == errno_wanted,
    };
    if expected {
        Ok(())
    } else if n < 0 {
        Err(format!("write: {}", errno_text(errno())))
    } else {
        Err(format!("short write: {n} of {} bytes", bytes.len()))
    }
}

/// `fork()` of a child that `_exit`s at once, and `waitpid` for it.
fn fork_and_wait() -> Result<(), String> {
    // SAFETY: the scenario process is single-threaded here; the child only calls _exit.
    match unsafe { libc::fork() } {
        -1 => Err(format!("fork: {}", errno_text(errno()))),
        0 => unsafe { libc::_exit(0) },
        pid => {
            let mut status = 0;
            // SAFETY: waitpid writes only the status integer.
            if unsafe { libc::waitpid(pid, &mut status, 0) } != pid || status != 0 {
                return Err(format!("waitpid {pid}: status {status}, {}", errno_text(errno())));
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests;
