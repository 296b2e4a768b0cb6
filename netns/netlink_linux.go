package netns

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Netlink framing, hand-rolled: the header, attributes (rtattr/nlattr share
// a layout) and the fixed heads of the rtnetlink messages used here.

const (
	nlaTypeMask = ^uint16(unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)
	rtaNHID     = 30 // RTA_NH_ID, absent from x/sys/unix

	recvBufSize    = 32 << 10
	maxRecvBufSize = 1 << 20
	maxAttempts    = 5    // per request, after ENOBUFS, EBUSY or DUMP_INTR
	maxDumpMsgs    = 4096 // messages kept per dump; the rest are drained
)

var nl = binary.NativeEndian

func nlAlign(n int) int { return (n + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1) }

// message is one netlink message whose body is owned (copied out of the
// receive buffer).
type message struct {
	typ   uint16
	flags uint16
	seq   uint32
	pid   uint32
	body  []byte
}

// parseMessages splits one datagram into messages. The bodies alias b.
func parseMessages(b []byte) ([]message, error) {
	var msgs []message
	for len(b) > 0 {
		if len(b) < unix.NLMSG_HDRLEN {
			return nil, fmt.Errorf("%w: %d stray bytes after last message", ErrMalformed, len(b))
		}
		l := nl.Uint32(b[0:4])
		if l < unix.NLMSG_HDRLEN || uint64(l) > uint64(len(b)) {
			return nil, fmt.Errorf("%w: message length %d outside 16..%d", ErrMalformed, l, len(b))
		}
		msgs = append(msgs, message{
			typ:   nl.Uint16(b[4:6]),
			flags: nl.Uint16(b[6:8]),
			seq:   nl.Uint32(b[8:12]),
			pid:   nl.Uint32(b[12:16]),
			body:  b[unix.NLMSG_HDRLEN:l],
		})
		next := nlAlign(int(l))
		if next > len(b) {
			next = len(b)
		}
		b = b[next:]
	}
	return msgs, nil
}

// attr is one attribute; data aliases the message.
type attr struct {
	typ  uint16
	data []byte
}

// parseAttrs splits an attribute stream, checking every length.
func parseAttrs(b []byte) ([]attr, error) {
	var attrs []attr
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, fmt.Errorf("%w: %d stray bytes after last attribute", ErrMalformed, len(b))
		}
		l := int(nl.Uint16(b[0:2]))
		if l < 4 || l > len(b) {
			return nil, fmt.Errorf("%w: attribute length %d outside 4..%d", ErrMalformed, l, len(b))
		}
		attrs = append(attrs, attr{typ: nl.Uint16(b[2:4]) & nlaTypeMask, data: b[4:l]})
		next := nlAlign(l)
		if next > len(b) {
			next = len(b)
		}
		b = b[next:]
	}
	return attrs, nil
}

// appendAttr appends one attribute, padded to the netlink alignment.
func appendAttr(b []byte, typ uint16, data []byte) []byte {
	b = nl.AppendUint16(b, uint16(4+len(data)))
	b = nl.AppendUint16(b, typ)
	b = append(b, data...)
	for len(b)%unix.NLMSG_ALIGNTO != 0 {
		b = append(b, 0)
	}
	return b
}

// replyError is an errno the kernel answered with in NLMSG_ERROR or
// NLMSG_DONE: the request ran and was refused, as opposed to an I/O fault.
type replyError struct{ errno unix.Errno }

func (e *replyError) Error() string { return e.errno.Error() }
func (e *replyError) Unwrap() error { return e.errno }

// errRetry marks a request whose replies were lost or inconsistent; it is
// sent again with a fresh sequence number.
var errRetry = errors.New("retry")

// parseErrno reads the errno of an NLMSG_ERROR or NLMSG_DONE body (a
// negated int32). NLMSG_ERROR must also carry the original header.
func parseErrno(m message) (unix.Errno, error) {
	need := 4
	if m.typ == unix.NLMSG_ERROR {
		need = unix.SizeofNlMsgerr
	}
	if len(m.body) < need {
		if m.typ == unix.NLMSG_DONE && len(m.body) == 0 {
			return 0, nil // some old kernels send an empty DONE
		}
		return 0, fmt.Errorf("%w: %d-byte body for message type %d", ErrMalformed, len(m.body), m.typ)
	}
	code := int32(nl.Uint32(m.body[0:4]))
	if code > 0 || code < -4095 {
		return 0, fmt.Errorf("%w: error code %d", ErrMalformed, code)
	}
	return unix.Errno(-code), nil
}

// conn speaks rtnetlink over a borrowed fd under one deadline.
type conn struct {
	fd       int
	deadline time.Time
	seq      uint32
	port     uint32 // our netlink port id, known after the first send
	buf      []byte
}

// newConn checks that fd is a NETLINK_ROUTE socket. It changes nothing on
// the socket.
func newConn(fd int, deadline time.Time) (*conn, error) {
	dom, err := getsockoptInt(fd, unix.SO_DOMAIN)
	if errors.Is(err, unix.ENOTSOCK) {
		return nil, fmt.Errorf("%w: fd %d: %w", ErrNotNetlink, fd, err)
	}
	if err != nil {
		return nil, err
	}
	proto, err := getsockoptInt(fd, unix.SO_PROTOCOL)
	if err != nil {
		return nil, err
	}
	if dom != unix.AF_NETLINK || proto != unix.NETLINK_ROUTE {
		return nil, fmt.Errorf("%w: fd %d has domain %d protocol %d", ErrNotNetlink, fd, dom, proto)
	}
	return &conn{
		fd:       fd,
		deadline: deadline,
		// Start away from 0 and from what other users of the socket
		// likely used, so their stale replies never match.
		seq: uint32(time.Now().UnixNano()) | 1<<31,
		buf: make([]byte, recvBufSize),
	}, nil
}

func getsockoptInt(fd, opt int) (int, error) {
	for {
		v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, opt)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, os.NewSyscallError("getsockopt", err)
		}
		return v, nil
	}
}

// dump sends a NLM_F_DUMP request and returns the messages of type want, at
// most maxDumpMsgs of them; more reports whether any were dropped.
func (c *conn) dump(typ uint16, payload []byte, want uint16) (msgs []message, more bool, err error) {
	for range maxAttempts {
		msgs, more, err = c.roundTrip(typ, unix.NLM_F_REQUEST|unix.NLM_F_DUMP, payload, want)
		if !errors.Is(err, errRetry) {
			return msgs, more, err
		}
	}
	return nil, false, fmt.Errorf("%w after %d attempts", ErrInterrupted, maxAttempts)
}

// do sends a request with NLM_F_ACK and returns the messages of type want
// that precede the ack. A refusal is a *replyError. Only idempotent requests
// may set retry: a lost ack is answered by sending the request again.
func (c *conn) do(typ, flags uint16, payload []byte, want uint16, retry bool) ([]message, error) {
	attempts := 1
	if retry {
		attempts = maxAttempts
	}
	for range attempts {
		msgs, _, err := c.roundTrip(typ, unix.NLM_F_REQUEST|unix.NLM_F_ACK|flags, payload, want)
		if !errors.Is(err, errRetry) {
			return msgs, err
		}
	}
	return nil, fmt.Errorf("%w after %d attempts", ErrInterrupted, attempts)
}

// roundTrip sends one request and reads its replies until NLMSG_DONE (dump)
// or NLMSG_ERROR. Messages with another sequence number or another sender
// than the kernel are skipped. A dump is always read to its end, so that a
// retry never meets a dump still running (EBUSY).
func (c *conn) roundTrip(typ, flags uint16, payload []byte, want uint16) (msgs []message, more bool, err error) {
	seq, err := c.send(typ, flags, payload)
	if err != nil {
		return nil, false, err
	}
	isDump := flags&unix.NLM_F_DUMP == unix.NLM_F_DUMP
	stale := false // replies may be missing or inconsistent: retry at the end
	for {
		batch, err := c.recv()
		if errors.Is(err, errNoBufs) {
			// The kernel dropped a datagram. A dump is never dropped (it
			// waits for room), but an ack may have been.
			if !isDump {
				return nil, false, errRetry
			}
			stale = true
			continue
		}
		if err != nil {
			return nil, false, err
		}
		for _, m := range batch {
			if m.seq != seq || m.pid != c.port {
				continue // someone else's reply or notification
			}
			if m.flags&unix.NLM_F_DUMP_INTR != 0 {
				stale = true
			}
			switch m.typ {
			case unix.NLMSG_NOOP:
			case unix.NLMSG_ERROR, unix.NLMSG_DONE:
				if m.typ == unix.NLMSG_DONE && !isDump {
					return nil, false, fmt.Errorf("%w: NLMSG_DONE answering a non-dump request", ErrMalformed)
				}
				errno, err := parseErrno(m)
				if err != nil {
					return nil, false, err
				}
				if errno == unix.EBUSY {
					// Someone else's dump is still running on this socket:
					// read it to its end, then ask again.
					if err := c.drain(); err != nil {
						return nil, false, err
					}
					return nil, false, errRetry
				}
				if errno == unix.EINTR || errno == unix.EAGAIN {
					return nil, false, errRetry
				}
				if errno != 0 {
					return nil, false, &replyError{errno}
				}
				if stale {
					return nil, false, errRetry
				}
				return msgs, more, nil
			case want:
				if len(msgs) >= maxDumpMsgs {
					more = true
					continue
				}
				m.body = append([]byte(nil), m.body...)
				msgs = append(msgs, m)
			default:
				return nil, false, fmt.Errorf("%w: message type %d answering type %d", ErrMalformed, m.typ, typ)
			}
		}
	}
}

// send writes one request to the kernel and returns its sequence number.
func (c *conn) send(typ, flags uint16, payload []byte) (uint32, error) {
	if !time.Now().Before(c.deadline) {
		return 0, ErrTimeout
	}
	c.seq++
	if c.seq == 0 {
		c.seq = 1
	}
	b := make([]byte, unix.NLMSG_HDRLEN, unix.NLMSG_HDRLEN+len(payload))
	nl.PutUint32(b[0:4], uint32(unix.NLMSG_HDRLEN+len(payload)))
	nl.PutUint16(b[4:6], typ)
	nl.PutUint16(b[6:8], flags)
	nl.PutUint32(b[8:12], c.seq)
	// nlmsg_pid 0: the kernel addresses its replies to the socket's port.
	b = append(b, payload...)
	to := &unix.SockaddrNetlink{Family: unix.AF_NETLINK}
	for {
		err := unix.Sendto(c.fd, b, unix.MSG_DONTWAIT, to)
		switch err {
		case nil:
			if c.port == 0 {
				// The first send autobinds an unbound socket.
				sa, err := unix.Getsockname(c.fd)
				if err != nil {
					return 0, os.NewSyscallError("getsockname", err)
				}
				nsa, ok := sa.(*unix.SockaddrNetlink)
				if !ok {
					return 0, fmt.Errorf("%w: getsockname returned %T", ErrNotNetlink, sa)
				}
				c.port = nsa.Pid
			}
			return c.seq, nil
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			if err := c.wait(unix.POLLOUT); err != nil {
				return 0, err
			}
			continue
		}
		return 0, os.NewSyscallError("sendto", err)
	}
}

// errNoBufs: the kernel dropped replies because the socket's receive queue
// was full (ENOBUFS).
var errNoBufs = errors.New("netlink receive queue overflowed")

// recv reads one datagram from the kernel and splits it. It peeks first, so
// a datagram is never truncated: the buffer grows to fit, up to
// maxRecvBufSize.
func (c *conn) recv() ([]message, error) {
	for {
		if err := c.wait(unix.POLLIN); err != nil {
			return nil, err
		}
		n, err := c.recvmsg(unix.MSG_PEEK | unix.MSG_TRUNC)
		if err == nil && n > len(c.buf) {
			if n > maxRecvBufSize {
				return nil, fmt.Errorf("%w: %d-byte datagram", ErrMalformed, n)
			}
			c.buf = make([]byte, n)
		}
		if err == nil {
			var from unix.Sockaddr
			n, _, _, from, err = unix.Recvmsg(c.fd, c.buf, nil, unix.MSG_DONTWAIT)
			if err == nil {
				if sa, ok := from.(*unix.SockaddrNetlink); !ok || sa.Pid != 0 {
					continue // not from the kernel: another socket unicast to us
				}
				return parseMessages(c.buf[:n])
			}
		}
		switch err {
		case unix.EINTR, unix.EAGAIN:
			continue
		case unix.ENOBUFS:
			return nil, errNoBufs
		}
		return nil, os.NewSyscallError("recvmsg", err)
	}
}

// drain discards every queued datagram. Each read lets a running dump
// queue its next part, so an empty queue means no dump is left running.
func (c *conn) drain() error {
	for {
		if !time.Now().Before(c.deadline) {
			return ErrTimeout
		}
		_, err := c.recvmsg(unix.MSG_TRUNC)
		switch err {
		case nil, unix.EINTR, unix.ENOBUFS:
			continue
		case unix.EAGAIN:
			return nil
		}
		return os.NewSyscallError("recvmsg", err)
	}
}

func (c *conn) recvmsg(flags int) (int, error) {
	n, _, _, _, err := unix.Recvmsg(c.fd, c.buf, nil, flags|unix.MSG_DONTWAIT)
	return n, err
}

// wait polls fd for events until the deadline.
func (c *conn) wait(events int16) error {
	for {
		left := time.Until(c.deadline)
		if left <= 0 {
			return ErrTimeout
		}
		ms := int((left + time.Millisecond - 1) / time.Millisecond)
		fds := []unix.PollFd{{Fd: int32(c.fd), Events: events}}
		n, err := unix.Poll(fds, ms)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return os.NewSyscallError("poll", err)
		}
		if n == 0 {
			continue
		}
		if fds[0].Revents&unix.POLLNVAL != 0 {
			return os.NewSyscallError("poll", unix.EBADF)
		}
		// POLLERR carries a pending socket error; the next call reports it.
		return nil
	}
}
