//! The handshake refuses strangers with `Protocol` errors naming what is wrong, and a mesh
//! moves bytes between its ranks.

use super::*;

/// Connects to a fresh listener, writes `bytes`, and checks the hello the listener reads.
fn hello_from(bytes: &[u8]) -> Result<()> {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    c.write_all(bytes).unwrap();
    drop(c.shutdown(std::net::Shutdown::Write));
    let (mut a, _) = l.accept().unwrap();
    a.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    check_hello(&mut a, [7; 16], 4, 2)
}

#[test]
fn strangers_get_protocol_errors() {
    assert!(hello_from(&hello([7; 16], 2, 0, 4)).is_ok());
    let cases: [(Vec<u8>, &str); 5] = [
        (b"GET / HTTP/1.1\r\n\r\n".repeat(8), "magic"),
        (
            {
                let mut h = hello([7; 16], 2, 0, 4);
                h[4] = 9;
                h.to_vec()
            },
            "version 9",
        ),
        (hello([8; 16], 2, 0, 4).to_vec(), "another communicator"),
        (hello([7; 16], 3, 0, 4).to_vec(), "rank 3 of 4"),
        (wire::encode_header(&FrameHeader::control(FrameKind::Heartbeat, [7; 16], 2, 0)).to_vec(), "Heartbeat"),
    ];
    for (bytes, what) in cases {
        let e = hello_from(&bytes).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Protocol, "{e}");
        assert!(e.to_string().contains(what), "{what}: {e}");
    }
    // Truncated: the peer closes mid-hello.
    assert_eq!(hello_from(&hello([7; 16], 2, 0, 4)[..40]).unwrap_err().kind(), ErrorKind::Io);
}
