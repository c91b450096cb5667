//! `agentloop runs cancel | pause | unpause | approve | reject | answer`: requests for a run,
//! recorded in the store through the run service, for the run's executor in whatever
//! process it runs (a cancel or a pause), or for the next `runs resume` (a decision, an
//! answer).

use agentloop::service::RunService;
use agentloop::store::RunStore;
use std::sync::Arc;

/// What is requested of the run.
pub enum Request {
    Cancel(String),
    Pause(String),
    Unpause,
    Approve(String),
    Reject { call_id: String, reason: String },
    Answer(String),
}

/// Records `request` for `run_id` and says what happens next.
pub async fn request(
    store: Arc<dyn RunStore>,
    run_id: &str,
    request: Request,
) -> anyhow::Result<i32> {
    let service = RunService::new(store.clone());
    if store.next_seq(run_id).await? == 0 {
        anyhow::bail!("no run '{}' in the store", crate::runs::cell(run_id));
    }
    let next = match request {
        Request::Cancel(reason) => {
            service.cancel(run_id, reason).await?;
            "its executor cancels it within a second; a run nobody executes now is cancelled \
             by the next `agentloop runs resume`"
        }
        Request::Pause(reason) => {
            service.pause(run_id, reason).await?;
            "its executor pauses at the next safe point"
        }
        Request::Unpause => {
            service.resume(run_id).await?;
            "its executor goes on"
        }
        Request::Approve(call_id) => {
            service.approve(run_id, &call_id).await?;
            "`agentloop runs resume` runs the call and continues the run"
        }
        Request::Reject { call_id, reason } => {
            service.reject(run_id, &call_id, reason).await?;
            "`agentloop runs resume` continues the run with the rejection as the call's result"
        }
        Request::Answer(text) => {
            service.send_input(run_id, text).await?;
            "`agentloop runs resume` continues the run with the answer"
        }
    };
    println!("recorded for {}: {next}", crate::runs::cell(run_id));
    Ok(0)
}
