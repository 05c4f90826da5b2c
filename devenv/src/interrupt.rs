//! The Ctrl-C handler of the long-running tools (the e2e harness, the lab
//! benchmarks): the first SIGINT or SIGTERM runs their cleanup and exits,
//! a second exits at once. Owns the signal thread; what to clean up is the
//! caller's.

use anyhow::{Context, Result};
use std::sync::Arc;
use tokio::runtime::Runtime;

/// On SIGINT (Ctrl-C) or SIGTERM: prints `<who>: interrupted, cleaning
/// up`, runs `cleanup` on a thread of its own and exits with 130 (SIGINT)
/// or 143 (SIGTERM) once it returns; a second signal exits at once, so a
/// cleanup that hangs never traps the user. The signals are taken on
/// `runtime`, which the handler's thread blocks on. Install once per
/// process, before anything that needs cleaning up exists.
pub fn on_interrupt(
    runtime: Arc<Runtime>,
    who: &'static str,
    cleanup: impl FnOnce() + Send + 'static,
) -> Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let (mut int, mut term) = {
        let _guard = runtime.enter();
        (
            signal(SignalKind::interrupt()).context("installing the SIGINT handler")?,
            signal(SignalKind::terminate()).context("installing the SIGTERM handler")?,
        )
    };
    std::thread::Builder::new()
        .name(format!("{who}-interrupt"))
        .spawn(move || {
            let code = runtime.block_on(async {
                tokio::select! {
                    _ = int.recv() => 130,
                    _ = term.recv() => 143,
                }
            });
            eprintln!("\n{who}: interrupted, cleaning up (signal again to exit now)");
            let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
            let spawned = std::thread::Builder::new()
                .name(format!("{who}-cleanup"))
                .spawn(move || {
                    cleanup();
                    let _ = done_tx.send(());
                });
            if spawned.is_ok() {
                runtime.block_on(async {
                    tokio::select! {
                        _ = done_rx => {}
                        _ = int.recv() => {}
                        _ = term.recv() => {}
                    }
                });
            }
            std::process::exit(code);
        })
        .context("starting the interrupt handler thread")?;
    Ok(())
}
