//! The protobuf codec of the generated service and client: prost's, except that a
//! message that does not decode is the client's fault. tonic's prost codec reports it
//! as `INTERNAL`; here it is `INVALID_ARGUMENT` with the ErrorInfo reason
//! `PARSE_ERROR` (the gRPC form of JSON-RPC's -32700), and the text says which
//! message type failed and why, without anything from the server's side.

use std::marker::PhantomData;

use prost::Message;
use tonic::Status;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder};
use tonic_prost::{ProstCodec, ProstDecoder, ProstEncoder};

use crate::error::A2aError;

/// A [`Codec`] encoding `T` and decoding `U` with prost.
#[derive(Debug, Clone)]
pub struct A2aCodec<T, U> {
    inner: ProstCodec<T, U>,
}

impl<T, U> Default for A2aCodec<T, U> {
    fn default() -> Self {
        Self {
            inner: ProstCodec::default(),
        }
    }
}

impl<T, U> Codec for A2aCodec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = A2aDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        self.inner.encoder()
    }

    fn decoder(&mut self) -> Self::Decoder {
        A2aDecoder {
            inner: self.inner.decoder(),
            _message: PhantomData,
        }
    }
}

/// Decodes one `U`; see the module docs for its errors.
#[derive(Debug, Clone)]
pub struct A2aDecoder<U> {
    inner: ProstDecoder<U>,
    _message: PhantomData<U>,
}

impl<U: Message + Default> Decoder for A2aDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        self.inner.decode(buf).map_err(|status| {
            super::status::from_error(&A2aError::ParseError(format!(
                "the message is not a valid {}: {}",
                message_name::<U>(),
                status.message()
            )))
        })
    }

    fn buffer_settings(&self) -> BufferSettings {
        self.inner.buffer_settings()
    }
}

/// The proto message name of `U` as Rust spells it (`SendMessageRequest`).
fn message_name<U>() -> &'static str {
    let full = std::any::type_name::<U>();
    full.rsplit("::").next().unwrap_or(full)
}
