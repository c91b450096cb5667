//! OTLP over gRPC (feature `grpc`): the encoded request sent as is to
//! `opentelemetry.proto.collector.trace.v1.TraceService/Export` by tonic, on a
//! current-thread runtime the export thread makes and owns.

use crate::export::SpanSink;
use crate::Error;
use bytes::{Buf, BufMut, Bytes};
use std::time::Duration;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::metadata::MetadataMap;
use tonic::transport::Channel;
use tonic::Status;

const EXPORT: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

pub(crate) struct GrpcSink {
    endpoint: tonic::transport::Endpoint,
    /// The runtime and channel, made on the export thread by the first export: a runtime
    /// must not be made or dropped inside the caller's async context.
    connected: Option<(tokio::runtime::Runtime, Channel)>,
    metadata: MetadataMap,
    timeout: Duration,
}

impl GrpcSink {
    pub(crate) fn new(url: &str, metadata: MetadataMap, timeout: Duration) -> Result<Self, Error> {
        let endpoint = tonic::transport::Endpoint::from_shared(url.to_owned())
            .map_err(|e| Error::Config(format!("the gRPC endpoint {url:?}: {e}")))?
            .timeout(timeout)
            .connect_timeout(timeout);
        Ok(Self { endpoint, connected: None, metadata, timeout })
    }

    fn connect(&mut self) -> Result<&(tokio::runtime::Runtime, Channel), String> {
        if self.connected.is_none() {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| format!("cannot start the gRPC runtime: {e}"))?;
            let channel = {
                let _entered = runtime.enter();
                self.endpoint.connect_lazy()
            };
            self.connected = Some((runtime, channel));
        }
        self.connected.as_ref().ok_or_else(|| "no gRPC channel".to_owned())
    }
}

impl SpanSink for GrpcSink {
    fn export(&mut self, request: &[u8], spans: usize) -> Result<(), String> {
        self.export_bytes(Bytes::copy_from_slice(request), spans)
    }

    fn export_bytes(&mut self, request: Bytes, _spans: usize) -> Result<(), String> {
        let mut message = tonic::Request::new(request);
        *message.metadata_mut() = self.metadata.clone();
        message.set_timeout(self.timeout);
        let (runtime, channel) = self.connect()?;
        let mut grpc = tonic::client::Grpc::new(channel.clone());
        let path = http::uri::PathAndQuery::from_static(EXPORT);
        runtime.block_on(async move {
            grpc.ready().await.map_err(|e| format!("the collector is not reachable: {e}"))?;
            grpc.unary::<Bytes, Bytes, _>(message, path, Raw)
                .await
                .map(drop)
                .map_err(|status| format!("the collector answered {}", status.code()))
        })
    }
}

/// Sends bytes as they are and reads the answer as bytes (an
/// `ExportTraceServiceResponse`, ignored: a partial success still counts as exported).
#[derive(Debug, Clone, Copy)]
struct Raw;

impl Codec for Raw {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = Raw;
    type Decoder = Raw;

    fn encoder(&mut self) -> Self::Encoder {
        Raw
    }

    fn decoder(&mut self) -> Self::Decoder {
        Raw
    }
}

impl Encoder for Raw {
    type Item = Bytes;
    type Error = Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put(item);
        Ok(())
    }
}

impl Decoder for Raw {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}
