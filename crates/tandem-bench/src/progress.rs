//! Progress of a `tandem bench` command: on a terminal, a bar per launch
//! (its steps as the kernel reports them) under a bar over the command's
//! launches; elsewhere (a log, a pipe), a line on stderr as each launch
//! starts, so that a long run is never silent.

use std::io::IsTerminal;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The command's launches so far and in all.
struct Overall {
    what: String,
    done: u64,
    total: u64,
    bar: Option<ProgressBar>,
}

static OVERALL: Mutex<Option<Overall>> = Mutex::new(None);

fn multi() -> &'static MultiProgress {
    static MULTI: OnceLock<MultiProgress> = OnceLock::new();
    MULTI.get_or_init(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr()))
}

fn terminal() -> bool {
    std::io::stderr().is_terminal()
}

/// Starts counting the `total` launches of a command called `what` (e.g.
/// "report"); each [`launch_bar`] counts one. Without a terminal nothing
/// is drawn, and each launch prints its number.
pub fn start(what: &str, total: u64) {
    let bar = terminal().then(|| {
        let b = multi().add(ProgressBar::new(total.max(1)));
        b.set_style(
            ProgressStyle::with_template(
                "{prefix} [{bar:30}] {pos}/{len} launches, {elapsed} so far, about {eta} left",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        b.set_prefix(format!("tandem bench {what}"));
        b.enable_steady_tick(Duration::from_secs(1));
        b
    });
    *OVERALL.lock().unwrap_or_else(|e| e.into_inner()) = Some(Overall {
        what: what.to_string(),
        done: 0,
        total,
        bar,
    });
}

/// Adds launches to the command's total (a run measured once more).
pub fn more(n: u64) {
    if let Some(o) = OVERALL.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        o.total += n;
        if let Some(b) = &o.bar {
            b.inc_length(n);
        }
    }
}

/// Ends the command's count and clears its bar.
pub fn finish() {
    if let Some(o) = OVERALL.lock().unwrap_or_else(|e| e.into_inner()).take() {
        if let Some(b) = o.bar {
            b.finish_and_clear();
        }
    }
}

/// Prints a line on stderr without tearing the bars.
pub fn note(line: &str) {
    if terminal() {
        multi().suspend(|| eprintln!("{line}"));
    } else {
        eprintln!("{line}");
    }
}

/// A launch called `label` begins: it counts toward the command's total,
/// and on a terminal gets a bar of its own (`None` elsewhere, where the
/// launch is announced by a line instead).
pub fn launch_bar(label: &str) -> Option<ProgressBar> {
    let mut overall = OVERALL.lock().unwrap_or_else(|e| e.into_inner());
    let count = overall.as_mut().map(|o| {
        o.done += 1;
        if o.done > o.total {
            o.total = o.done;
            if let Some(b) = &o.bar {
                b.set_length(o.total);
            }
        }
        if let Some(b) = &o.bar {
            b.set_position(o.done - 1);
        }
        (o.what.clone(), o.done, o.total)
    });
    drop(overall);
    if !terminal() {
        match count {
            Some((what, done, total)) => {
                eprintln!("tandem bench {what}: [{done}/{total}] {label}")
            }
            None => eprintln!("tandem bench: {label}"),
        }
        return None;
    }
    let b = multi().add(ProgressBar::new(1));
    b.set_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {msg} ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    b.set_prefix(label.to_string());
    b.enable_steady_tick(Duration::from_millis(500));
    Some(b)
}

/// A launch ended: its bar goes, and the command's bar moves on.
pub fn launch_done(bar: Option<ProgressBar>) {
    if let Some(b) = bar {
        b.finish_and_clear();
        multi().remove(&b);
    }
    if let Some(o) = OVERALL.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
        if let Some(b) = &o.bar {
            b.set_position(o.done);
        }
    }
}
