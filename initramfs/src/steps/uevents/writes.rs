//! The steps that write events or make many: `write` (the index and the fields in one buffer,
//! or one iovec each; from a bad address; at an offset) and `register_until` (registrations
//! until the kernel refuses one).

use super::*;

/// How many registrations of `register_until` between two progress markers: about one every
/// 1-3 s on a healthy kernel under TCG, a line the console carries at no cost.
const PROGRESS_EVERY: u32 = 1024;

impl UserEvents {
    /// `Step::RegisterUntil`: registrations of `format` with `{i}` counting up until one fails.
    ///
    /// Each registration is unregistered at once: the event lives on through the file's reference
    /// to it, and the process's enabler list stays short (the kernel walks that whole list on
    /// every registration to refuse a reused address and bit). Every [`EVENTS_PER_FILE`] events
    /// a new descriptor is opened, because the kernel copies a file's whole reference array for
    /// each new event. Both costs are quadratic, and tens of thousands of events under TCG
    /// would otherwise take many minutes. Every [`PROGRESS_EVERY`] registrations a progress
    /// marker goes to the kernel log, so the host can end a fill that crawls or has stopped.
    pub fn register_until(&self, format: &str, max: u32, expect: &Expect, say: &mut dyn FnMut(&str)) -> Done {
        const EVENTS_PER_FILE: u32 = 256;
        let what = format!("register {format:?} for {{i}} from 0 until a failure (at most {max})");
        if !format.contains("{i}") {
            return Err(format!("{what}: the format has no {{i}}"));
        }
        let word = self.word(None)?;
        let mut files: Vec<OwnedFd> = Vec::new();
        let started = Instant::now();
        for i in 0..max {
            if i % EVENTS_PER_FILE == 0 {
                let file = OpenOptions::new().read(true).write(true).open(&self.data_path).map_err(|e| {
                    let why = e.raw_os_error().map_or_else(|| e.to_string(), errno_text);
                    format!("{what}: opening {} after {i} events: {why}", self.data_path.display())
                })?;
                files.push(OwnedFd::from(file));
            }
            let fd = files.last().expect("opened above").as_raw_fd();
            if let Err(e) = register_bit0(fd, &format.replace("{i}", &i.to_string()), word) {
                let got = format!(
                    "{i} events registered on {} files in {} ms, then {}",
                    files.len(),
                    started.elapsed().as_millis(),
                    errno_text(e)
                );
                // The files stay open until the scenario's process exits, so the events do too.
                self.names().kept_files.extend(files);
                return Ok(check_result(&what, &got, Err(e), expect, say));
            }
            if let Err(e) = unregister_bit0(fd, word) {
                return Err(format!("{what}: unregistering event {i}: {}", errno_text(e)));
            }
            if (i + 1) % PROGRESS_EVERY == 0 {
                crate::steps::progress_marker(u64::from(i + 1), u64::from(max), started.elapsed().as_millis() as u64);
            }
        }
        say(&format!("{what}: all {max} registered in {} ms, none failed", started.elapsed().as_millis()));
        self.names().kept_files.extend(files);
        Ok(StepOutcome::Fail)
    }

    pub fn write(&self, fd: &str, p: &Payload<'_>, expect: &Expect, say: &mut dyn FnMut(&str)) -> Done {
        // A payload from elsewhere always goes as a second iovec after the index.
        let vectored = p.vectored || p.from.is_some();
        let call = match (vectored, p.offset.is_some()) {
            (false, false) => "write",
            (true, false) => "writev",
            (false, true) => "pwrite",
            (true, true) => "pwritev",
        };
        let (index, index_shown) = match (p.index, p.index_value) {
            (Some(n), None) => {
                let i = *self.names().indexes.get(n).ok_or_else(|| format!("{call}: no write index named {n}"))?;
                (i, format!("{n}={i}"))
            }
            (None, Some(v)) => (v, v.to_string()),
            (None, None) => return Err(format!("{call}: needs `index` or `index_value`")),
            (Some(_), Some(_)) => return Err(format!("{call}: `index` and `index_value` both given")),
        };
        let mut parts = vec![index.to_ne_bytes().to_vec()];
        for field in p.fields {
            parts.push(field.encode().map_err(|e| format!("{call}: {e}"))?);
        }
        let total: usize = parts.iter().map(Vec::len).sum();
        let mut what = format!("{call} index {index_shown} + {} fields", p.fields.len());
        if p.vectored && p.from.is_none() {
            what.push_str(&format!(" in {} iovecs", parts.len()));
        }
        let from = p.from.map(|at| self.names().scratch.resolve(at, 0).map(|slot| (at, slot))).transpose()?;
        if let Some((at, slot)) = from {
            let len = total - 4;
            let shown = match slot {
                Slot::At(a) => addr_text(at, a),
                Slot::Hole => "unmapped".to_string(),
            };
            what.push_str(&format!(" (4 + {len} bytes, the {len} from {shown})"));
        } else {
            what.push_str(&format!(" ({total} bytes: {})", hex_parts(&parts)));
        }
        if let Some(off) = p.offset {
            what.push_str(&format!(" at offset {off}"));
        }
        if fd != protocol::DATA_FD {
            what.push_str(&format!(" on fd {fd}"));
        }
        let fd = self.fd(fd).map_err(|e| format!("{what}: {e}"))?;
        let mut iov: Vec<libc::iovec> = Vec::with_capacity(parts.len() + 1);
        if vectored {
            iov.extend(parts.iter().map(|b| libc::iovec { iov_base: b.as_ptr() as *mut _, iov_len: b.len() }));
        }
        if let Some((_, slot)) = from {
            let len = total - 4;
            let base = match slot {
                Slot::At(a) => a,
                Slot::Hole => memory::hole()?,
            };
            iov.truncate(1);
            // From here to the call nothing allocates (the hole must stay a hole): the capacity
            // was reserved above.
            iov.push(libc::iovec { iov_base: base as *mut _, iov_len: len });
        }
        let buf = if iov.is_empty() { parts.concat() } else { vec![] };
        // SAFETY: every iovec points into `parts` (alive across the call) or at an address chosen
        // to be checked by the kernel (EFAULT, not corruption); `buf` is valid for its length.
        let n = unsafe {
            match (iov.is_empty(), p.offset) {
                (false, None) => libc::writev(fd, iov.as_ptr(), iov.len() as libc::c_int),
                (false, Some(off)) => libc::pwritev(fd, iov.as_ptr(), iov.len() as libc::c_int, off),
                (true, None) => libc::write(fd, buf.as_ptr().cast(), buf.len()),
                (true, Some(off)) => libc::pwrite(fd, buf.as_ptr().cast(), buf.len(), off),
            }
        };
        let result = if n >= 0 { Ok(n as i64) } else { Err(errno()) };
        let got = match result {
            Ok(n) => format!("ok, {n} bytes"),
            Err(e) => errno_text(e),
        };
        Ok(check_result(&what, &got, result, expect, say))
    }
}
