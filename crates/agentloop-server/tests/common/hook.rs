//! A webhook on 127.0.0.1 that records the push notifications it gets.

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One request the webhook got: its headers, body and the status it answered.
#[derive(Clone, Debug)]
pub struct Got {
    pub headers: HeaderMap,
    pub body: Value,
    pub status: u16,
}

type Plan = Box<dyn Fn(usize) -> u16 + Send + Sync>;

/// A webhook on 127.0.0.1 that answers request `n` with `plan(n)`, after a delay (none
/// unless set). A request is recorded when it arrives.
pub struct Hook {
    pub url: String,
    got: Arc<Mutex<Vec<Got>>>,
    plan: Arc<Mutex<Plan>>,
    delay: Arc<Mutex<Duration>>,
}

impl Hook {
    pub async fn start(plan: impl Fn(usize) -> u16 + Send + Sync + 'static) -> Self {
        let got: Arc<Mutex<Vec<Got>>> = Arc::default();
        let plan: Arc<Mutex<Plan>> = Arc::new(Mutex::new(Box::new(plan)));
        let delay: Arc<Mutex<Duration>> = Arc::default();
        let (g, p, d) = (got.clone(), plan.clone(), delay.clone());
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(move |headers: HeaderMap, body: Bytes| {
                let (got, plan, delay) = (g.clone(), p.clone(), d.clone());
                async move {
                    let status = {
                        let mut got = got.lock().unwrap();
                        let status = (plan.lock().unwrap())(got.len());
                        let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
                        got.push(Got { headers, body, status });
                        status
                    };
                    let delay = *delay.lock().unwrap();
                    tokio::time::sleep(delay).await;
                    StatusCode::from_u16(status).unwrap()
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { url, got, plan, delay }
    }

    /// A webhook that answers 200 to everything, each after `delay`.
    pub async fn slow(delay: Duration) -> Self {
        let hook = Self::start(|_| 200).await;
        *hook.delay.lock().unwrap() = delay;
        hook
    }

    pub fn got(&self) -> Vec<Got> {
        self.got.lock().unwrap().clone()
    }

    pub fn delivered(&self) -> Vec<Value> {
        self.got().into_iter().filter(|g| g.status == 200).map(|g| g.body).collect()
    }

    pub fn set_plan(&self, plan: impl Fn(usize) -> u16 + Send + Sync + 'static) {
        *self.plan.lock().unwrap() = Box::new(plan);
    }

    /// Waits until a delivered update says the task completed; the delivered updates.
    pub async fn until_completed(&self) -> Vec<Value> {
        for _ in 0..300 {
            let delivered = self.delivered();
            if delivered.iter().any(|u| super::state_of(u) == Some("TASK_STATE_COMPLETED")) {
                return delivered;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the task's completion was not delivered: {:?}", self.got());
    }
}
