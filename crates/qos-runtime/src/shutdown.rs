//! How the runtime's long-running services stop (the manager, an agent with its
//! enforcement backend): on Ctrl-C or SIGTERM ([`signal`]), and through one
//! [`Shutdown`] whose [`Stop`] tokens every task, async or on a thread of its own,
//! watches. Stopping is level-triggered: a token cloned after the trigger sees it too.

use tokio::sync::watch;

/// Waits for Ctrl-C or SIGTERM.
pub async fn signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(t) => t,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// The switch that stops a service's tasks.
#[derive(Debug)]
pub struct Shutdown {
    tx: watch::Sender<bool>,
}

impl Default for Shutdown {
    fn default() -> Self {
        Shutdown::new()
    }
}

impl Shutdown {
    /// Not yet triggered.
    pub fn new() -> Shutdown {
        Shutdown {
            tx: watch::channel(false).0,
        }
    }

    /// Tells every [`Stop`] to stop (again is harmless).
    pub fn trigger(&self) {
        self.tx.send_replace(true);
    }

    /// A token for one task.
    pub fn stop(&self) -> Stop {
        Stop {
            rx: self.tx.subscribe(),
        }
    }
}

/// What a task watches to know when to stop.
#[derive(Debug, Clone)]
pub struct Stop {
    rx: watch::Receiver<bool>,
}

impl Stop {
    /// Whether the stop was triggered.
    pub fn requested(&self) -> bool {
        *self.rx.borrow()
    }

    /// Returns once the stop is triggered (at once if it was), or the [`Shutdown`] is
    /// gone.
    pub async fn wait(&mut self) {
        let _ = self.rx.wait_for(|s| *s).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_stop_sees_a_trigger_made_before_and_after_it_waits() {
        let s = Shutdown::new();
        let mut early = s.stop();
        assert!(!early.requested());
        let waiter = tokio::spawn(async move { early.wait().await });
        s.trigger();
        waiter.await.unwrap();
        let mut late = s.stop();
        assert!(late.requested());
        late.wait().await;
    }
}
