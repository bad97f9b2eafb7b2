//! How far a long command is, on stderr: a bar on a terminal; in a log (stderr not a
//! terminal) a plain line when the work starts, every [`EVERY`] while it runs and when
//! it ends — what runs, how far, elapsed — so that `reproduce yum > log 2>&1` is never
//! silent for minutes. The experiments report through
//! [`qos_experiments::experiment::Progress`]; nothing here changes their results.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use qos_experiments::experiment::Progress;

/// How often a plain progress line is printed while work runs.
pub const EVERY: Duration = Duration::from_secs(10);

/// A progress display for the command `name` ("reproduce yum").
pub struct Display {
    name: String,
    start: Instant,
    bar: Option<ProgressBar>,
    lines: Option<Mutex<Lines>>,
}

/// The state of plain lines.
struct Lines {
    total: u64,
    done: u64,
    last: Instant,
}

/// Elapsed time as `1m 23s`.
fn elapsed(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 60 {
        format!("{}m {:02}s", s / 60, s % 60)
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

impl Display {
    /// A bar when stderr is a terminal (none with `quiet`, e.g. `--json`); plain lines
    /// when it is not.
    pub fn new(name: impl Into<String>, quiet: bool) -> Display {
        let terminal = std::io::stderr().is_terminal();
        let bar = (terminal && !quiet).then(|| {
            let b = ProgressBar::new(0);
            b.set_draw_target(ProgressDrawTarget::stderr());
            b.set_style(
                ProgressStyle::with_template(
                    "{spinner} [{bar:30}] {pos}/{len} {msg} ({elapsed}, eta {eta})",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            b
        });
        let lines = (!terminal).then(|| {
            Mutex::new(Lines {
                total: 0,
                done: 0,
                last: Instant::now(),
            })
        });
        Display {
            name: name.into(),
            start: Instant::now(),
            bar,
            lines,
        }
    }

    /// Clears the bar (before the results are printed).
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }

    fn line(&self, text: &str) {
        eprintln!(
            "{}: {text} ({} elapsed)",
            self.name,
            elapsed(self.start.elapsed())
        );
    }
}

impl Progress for Display {
    fn plan(&self, total: u64) {
        if let Some(b) = &self.bar {
            b.set_length(total);
        }
        if let Some(l) = &self.lines {
            // Runs that plan more work as they go (a sensitivity run's trials) say so
            // in the next progress line, not in one line each.
            let first = match l.lock() {
                Ok(mut l) => {
                    let first = l.total == 0;
                    l.total = total;
                    if first {
                        l.last = Instant::now();
                    }
                    first
                }
                Err(_) => false,
            };
            if first {
                self.line(&format!("{total} to run"));
            }
        }
    }

    fn done(&self, what: &str) {
        if let Some(b) = &self.bar {
            b.set_message(what.to_string());
            b.inc(1);
        }
        if let Some(l) = &self.lines {
            let Ok(mut l) = l.lock() else { return };
            l.done += 1;
            if l.done == l.total || l.last.elapsed() >= EVERY {
                l.last = Instant::now();
                let (done, total) = (l.done, l.total);
                drop(l);
                self.line(&format!("{done}/{total} done, last {what}"));
            }
        }
    }

    fn within(&self, what: &str, at: u64, of: u64) {
        if let Some(b) = &self.bar {
            b.set_message(format!("{what}: cycle {at} of {of}"));
        }
        if let Some(l) = &self.lines {
            let Ok(mut l) = l.lock() else { return };
            if l.last.elapsed() >= EVERY {
                l.last = Instant::now();
                let (done, total) = (l.done, l.total);
                drop(l);
                self.line(&format!(
                    "{done}/{total} done; running {what}: cycle {at} of {of}"
                ));
            }
        }
    }
}
