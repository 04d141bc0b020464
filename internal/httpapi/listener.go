package httpapi

import (
	"bytes"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// MaxHeaderBytes is the most a request's line (its URL included) and
// headers may take, in bytes: net/http's default, set on the server
// explicitly (http.Server.MaxHeaderBytes) so that the error message can
// say it.
const MaxHeaderBytes = 1 << 20

// ListenerOptions configure Listener.
type ListenerOptions struct {
	// MaxConnsPerClient is how many connections one client address may
	// hold while the server holds more than ConnsBeforeClientCap in all;
	// 0 or less turns the cap off. An IPv6 client's address is its /64,
	// which one host commonly has whole.
	MaxConnsPerClient int
	// ConnsBeforeClientCap is how many connections the server holds, from
	// any clients, before MaxConnsPerClient applies: below it no client is
	// refused, so that a machine that runs many clients (a CI job, a proxy
	// in front of the server) is never cut while the server is not under
	// pressure. 0 or less applies the cap always.
	ConnsBeforeClientCap int
	// Metrics receives sextant_http_connections_open and
	// sextant_http_connections_refused_total; nil registers none.
	Metrics prometheus.Registerer
}

// Listener wraps a listener for http.Server.
//
// It caps the connections of one client address (see ListenerOptions):
// a connection over the cap is answered 429 with a JSON error and closed
// at once, before net/http reads anything from it, so that one client
// cannot hold every connection the server can afford.
//
// It also makes net/http's own answer to a request line and headers over
// MaxHeaderBytes, a plain-text 431 written to the connection before any
// handler runs, go out as a JSON error like every other answer of the
// API. Nothing else a connection writes is changed: only a write that is
// exactly net/http's canned 431 is replaced (handler responses always
// carry a Date header, which it lacks). It must wrap the raw TCP
// listener, under any TLS.
func Listener(ln net.Listener, opts ListenerOptions) net.Listener {
	l := &capListener{Listener: ln, opts: opts, per: map[string]int{}}
	l.refused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sextant_http_connections_refused_total",
		Help: "Connections answered 429 and closed at once: their client address held --max-conns-per-client while the server held --conns-before-client-cap.",
	})
	if opts.Metrics != nil {
		opts.Metrics.MustRegister(l.refused, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sextant_http_connections_open",
			Help: "Client connections open, idle ones included.",
		}, func() float64 {
			l.mu.Lock()
			defer l.mu.Unlock()
			return float64(l.total)
		}))
	}
	return l
}

type capListener struct {
	net.Listener
	opts    ListenerOptions
	refused prometheus.Counter

	mu    sync.Mutex
	total int
	per   map[string]int // client key -> open connections
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key := clientKey(c.RemoteAddr())
		if !l.admit(key) {
			l.refused.Inc()
			select {
			case refusing <- struct{}{}:
				go func() {
					refuse(c, l.opts.MaxConnsPerClient)
					<-refusing
				}()
			default:
				c.Close() // a flood: no answer, no goroutine
			}
			continue
		}
		return &jsonErrConn{Conn: c, release: func() { l.release(key) }}, nil
	}
}

// admit counts a new connection from key, unless the cap refuses it.
func (l *capListener) admit(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if m := l.opts.MaxConnsPerClient; m > 0 && l.total >= l.opts.ConnsBeforeClientCap && l.per[key] >= m {
		return false
	}
	l.total++
	l.per[key]++
	return true
}

func (l *capListener) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if l.per[key]--; l.per[key] <= 0 {
		delete(l.per, key)
	}
}

// clientKey is what the cap counts connections by: the client's IP
// address, or for IPv6 its /64.
func clientKey(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	ip, ok := netip.AddrFromSlice(ta.IP)
	if !ok {
		return ta.IP.String()
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// refusing bounds the refusals answered at once (each takes a goroutine
// for up to a second).
var refusing = make(chan struct{}, 256)

// refuse answers a connection over the cap with a 429 and closes it. It
// writes before reading, then reads what the client sent (briefly, and no
// more than a little) so that the close does not reset the connection
// before the client has read the answer.
func refuse(c net.Conn, max int) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	body := tooManyConnsBody(max)
	_, err := c.Write([]byte("HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nRetry-After: 1\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\nConnection: close\r\n\r\n" + string(body)))
	if err != nil {
		return
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_, _ = io.CopyN(io.Discard, c, 64<<10)
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

// jsonErrConn is a connection the listener admitted: it rewrites
// net/http's 431 and gives its place back to the cap when it closes.
type jsonErrConn struct {
	net.Conn
	release func()
	once    sync.Once
}

func (c *jsonErrConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

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
