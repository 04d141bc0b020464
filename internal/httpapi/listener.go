package httpapi

import (
	"bytes"
	"io"
	"net"
	"strconv"
)

// MaxHeaderBytes is the most a request's line (its URL included) and
// headers may take, in bytes: net/http's default, set on the server
// explicitly (http.Server.MaxHeaderBytes) so that the error message can
// say it.
const MaxHeaderBytes = 1 << 20

// Listener wraps a listener for http.Server so that net/http's own answer
// to a request line and headers over MaxHeaderBytes, a plain-text 431
// written to the connection before any handler runs, goes out as a JSON
// error like every other answer of the API. Nothing else a connection
// writes is changed: only a write that is exactly net/http's canned 431
// is replaced (handler responses always carry a Date header, which it
// lacks). It must wrap the raw TCP listener, under any TLS.
func Listener(ln net.Listener) net.Listener { return jsonErrListener{ln} }

type jsonErrListener struct{ net.Listener }

func (l jsonErrListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &jsonErrConn{c}, nil
}

// plain431 is what net/http (server.go, conn.serve) writes when a request
// line and headers are over the limit; TestHeaderTooLargeIsJSON fails if
// a Go release changes it.
var plain431 = []byte("HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n431 Request Header Fields Too Large")

var json431 = func() []byte {
	body := headerTooLargeBody()
	return []byte("HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\nConnection: close\r\n\r\n" + string(body))
}()

type jsonErrConn struct{ net.Conn }

func (c *jsonErrConn) Write(p []byte) (int, error) {
	if len(p) == len(plain431) && bytes.Equal(p, plain431) {
		if _, err := c.Conn.Write(json431); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// ReadFrom keeps responses streamed from files on sendfile: net/http uses
// the connection's ReadFrom when it has one.
func (c *jsonErrConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

// CloseWrite lets net/http half-close the connection after an error, as
// it does on a bare TCP connection, so that the client reads the answer
// before the connection is reset.
func (c *jsonErrConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
