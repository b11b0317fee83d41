/* runtime/serve/conns.c — the open connections of `sluice serve` and what each is doing, so that
 * slow, silent and departed clients cannot hold what others need.
 *
 * libmicrohttpd's own timeout counts idle time only: a client that sends one header byte every few
 * seconds keeps its connection for ever, and enough of them take every connection there is
 * (slowloris).  It also cannot see a client leave while its connection is suspended (a request
 * waiting for a slot or for its generation).  So every connection is recorded here (its socket, when
 * it became ready for a request, whether its request line has come, whether the request is in), and
 * a watcher thread looks at them every WATCH_MS:
 *   - a request must arrive whole (line, headers, body) within request_timeout_s of the connection
 *     opening or, on a kept-alive connection, of its request line; past it the client gets 408 and
 *     the connection is closed (a kept-alive connection on which no request line came is closed
 *     silently timeout_s after its last response, whether or not it dribbles bytes);
 *   - a connection whose request waits on the model is peeked at: a client that closed its end
 *     has its request cancelled (its slot or queue place freed within a watch period and a pass).
 * At the connection limit a new connection takes the place of the oldest idle kept-alive one, or
 * else of the one whose request has been arriving longest (more than EVICT_AFTER_MS); when neither
 * exists it is refused.  libmicrohttpd counts connections per client address (its own limit).
 *
 * A connection is closed from here with shutdown(): libmicrohttpd then reads the end of the stream
 * and closes it itself, so the descriptor is only ever closed by its owner.  A record is removed
 * (under cmu) before libmicrohttpd closes the descriptor (MHD_CONNECTION_NOTIFY_CLOSED comes first),
 * so a descriptor used here under cmu is always the connection's own.
 */
#include "runtime/serve/serve_internal.h"

#include <errno.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "kernels/clock.h"

#define WATCH_MS 100
#define EVICT_AFTER_MS 1000

typedef struct conn_rec {
    struct conn_rec *prev, *next;
    struct MHD_Connection *c;
    int fd;
    uint64_t t_ready_ns;          /* opened, or its last request ended */
    uint64_t t_line_ns;           /* its current request line arrived (0: none yet) */
    bool served;                  /* a request was answered on it (kept alive since) */
    bool handled;                 /* its current request's headers reached the handler */
    bool received;                /* the current request is in: no deadline, not a victim */
    bool closing;                 /* shut down from here (it has had its answer) */
    job *j;                       /* a generation request waiting on the model */
} conn_rec;

static const char *reason_of(int status)
{
    switch (status) {
    case 400: return "Bad Request";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    default: return "Service Unavailable";
    }
}

/* Contract: serve_internal.h. */
void conn_raw_reply(int fd, int status, const char *msg)
{
    size_t blen;
    char *body = oai_error_body(status, msg, &blen);
    if (!body) return;
    char head[192];
    int hl = snprintf(head, sizeof head, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                      "Connection: close\r\n\r\n", status, reason_of(status), blen);
    /* a fresh or idle connection's send buffer is empty: these few hundred bytes go at once (else
     * they are dropped: the connection is being closed anyway) */
    if (send(fd, head, (size_t)hl, MSG_DONTWAIT | MSG_NOSIGNAL) == hl) send(fd, body, blen, MSG_DONTWAIT | MSG_NOSIGNAL);
    free(body);
}

static conn_rec *rec_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

/* Under cmu: answer (status 0: none) and close r's connection. */
static void close_conn(sl_server *s, conn_rec *r, int status, const char *msg)
{
    if (r->closing) return;
    if (status) conn_raw_reply(r->fd, status, msg);
    shutdown(r->fd, SHUT_RDWR);
    r->closing = true;
    s->n_closing++;
}

void conns_notify(void *cls, struct MHD_Connection *c, void **socket_context, enum MHD_ConnectionNotificationCode code)
{
    sl_server *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        conn_rec *r = calloc(1, sizeof *r);
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!r || !ci) {   /* untracked: libmicrohttpd's own limits still apply to it */
            free(r);
            return;
        }
        r->c = c;
        r->fd = ci->connect_fd;
        r->t_ready_ns = sl_now_ns();
        pthread_mutex_lock(&s->cmu);
        r->next = s->conns;
        if (s->conns) s->conns->prev = r;
        s->conns = r;
        s->n_conns++;
        pthread_mutex_unlock(&s->cmu);
        *socket_context = r;
        return;
    }
    conn_rec *r = *socket_context;
    if (!r) return;
    pthread_mutex_lock(&s->cmu);
    if (r->closing) s->n_closing--;
    if (r->prev) r->prev->next = r->next;
    else s->conns = r->next;
    if (r->next) r->next->prev = r->prev;
    s->n_conns--;
    pthread_mutex_unlock(&s->cmu);
    free(r);
    *socket_context = NULL;
}

void *conns_request_line(void *cls, const char *uri, struct MHD_Connection *c)
{
    (void)uri;
    sl_server *s = cls;
    conn_rec *r = rec_of(c);
    if (r) {
        pthread_mutex_lock(&s->cmu);
        r->t_line_ns = sl_now_ns();
        pthread_mutex_unlock(&s->cmu);
    }
    return NULL;
}

void conns_handled(sl_server *s, struct MHD_Connection *c)
{
    conn_rec *r = rec_of(c);
    if (!r) return;
    pthread_mutex_lock(&s->cmu);
    r->handled = true;
    pthread_mutex_unlock(&s->cmu);
}

/* Contract: serve_internal.h.  libmicrohttpd 0.9.75 refuses a Content-Length that is not a decimal
 * number (400) or does not fit 64 bits (413) before any callback of ours, and sends its answer with
 * the status line and headers twice.  It logs the refusal first, from the thread and in the middle
 * of the processing of that connection: the only one whose headers are parsed (its header size is
 * known) whose request never reached the handler.  It gets a clean answer and is shut down here, so
 * the doubled one never leaves (its send fails). */
void conns_mhd_refused(sl_server *s, int status)
{
    pthread_mutex_lock(&s->cmu);
    for (conn_rec *r = s->conns; r; r = r->next) {
        if (r->closing || r->handled || !r->t_line_ns) continue;
        if (!MHD_get_connection_info(r->c, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE)) continue;
        close_conn(s, r, status, status == 413 ? "the Content-Length is larger than this server accepts"
                                               : "malformed Content-Length header (it must be a decimal byte count)");
        break;
    }
    pthread_mutex_unlock(&s->cmu);
}

void conns_received(sl_server *s, struct MHD_Connection *c, job *j)
{
    conn_rec *r = rec_of(c);
    if (!r) return;
    pthread_mutex_lock(&s->cmu);
    r->received = true;
    if (j) r->j = j;
    pthread_mutex_unlock(&s->cmu);
}

void conns_completed(sl_server *s, struct MHD_Connection *c)
{
    conn_rec *r = rec_of(c);
    if (!r) return;
    pthread_mutex_lock(&s->cmu);
    r->served = r->served || r->received;
    r->received = r->handled = false;
    r->t_line_ns = 0;
    r->t_ready_ns = sl_now_ns();
    r->j = NULL;
    pthread_mutex_unlock(&s->cmu);
}

/* Under cmu: make room for one more connection.  false: none can be made. */
static bool evict_one(sl_server *s)
{
    const uint64_t now = sl_now_ns();
    conn_rec *idle = NULL, *slow = NULL;
    for (conn_rec *r = s->conns; r; r = r->next) {
        if (r->closing || r->received || r->j) continue;
        if (r->served && !r->t_line_ns) {
            if (!idle || r->t_ready_ns < idle->t_ready_ns) idle = r;
        } else {
            uint64_t since = r->t_line_ns ? r->t_line_ns : r->t_ready_ns;
            if (now - since >= EVICT_AFTER_MS * 1000000ull &&
                (!slow || since < (slow->t_line_ns ? slow->t_line_ns : slow->t_ready_ns)))
                slow = r;
        }
    }
    s->n_evicted += idle || slow;
    if (idle) close_conn(s, idle, 0, NULL);
    else if (slow)
        close_conn(s, slow, 503, "the server is at its connection limit and this request had not arrived whole; retry");
    else return false;
    return true;
}

enum MHD_Result conns_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
    (void)addr;
    (void)addrlen;
    sl_server *s = cls;
    pthread_mutex_lock(&s->cmu);
    bool ok = s->n_conns - s->n_closing < s->o.max_connections || evict_one(s);
    /* libmicrohttpd's limit has room for connections being closed, not for more than that */
    if (ok && s->n_conns >= s->o.max_connections + CONN_HEADROOM) ok = false;
    if (!ok) s->n_refused++;
    pthread_mutex_unlock(&s->cmu);
    return ok ? MHD_YES : MHD_NO;
}

/* Under cmu: the deadlines and the departed clients. */
static void watch_once(sl_server *s)
{
    const uint64_t now = sl_now_ns(), limit = (uint64_t)s->o.request_timeout_s * 1000000000ull,
                   idle = (uint64_t)s->o.timeout_s * 1000000000ull;
    for (conn_rec *r = s->conns; r; r = r->next) {
        if (r->closing) continue;
        if (r->j) {
            char b;
            ssize_t n = recv(r->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
                pthread_mutex_lock(&s->mu);
                if (!r->j->client_left) {
                    r->j->client_left = true;   /* the scheduler cancels it (sched.c admit) */
                    pthread_cond_broadcast(&s->cv);
                }
                pthread_mutex_unlock(&s->mu);
            }
            continue;
        }
        if (r->received) continue;
        if (r->served && !r->t_line_ns) {   /* kept alive, no request begun: --timeout since the last one */
            if (now - r->t_ready_ns >= idle) close_conn(s, r, 0, NULL);
            continue;
        }
        uint64_t since = r->t_line_ns ? r->t_line_ns : r->t_ready_ns;
        if (!limit || now - since < limit) continue;
        char m[160];
        snprintf(m, sizeof m, "the request did not arrive whole within %d s", s->o.request_timeout_s);
        close_conn(s, r, 408, m);
        s->n_timed_out++;
    }
}

static void *watch_main(void *arg)
{
    sl_server *s = arg;
    pthread_mutex_lock(&s->cmu);
    while (!s->watch_exit) {
        watch_once(s);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += WATCH_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
        pthread_cond_timedwait(&s->ccv, &s->cmu, &ts);
    }
    pthread_mutex_unlock(&s->cmu);
    return NULL;
}

int conns_start(sl_server *s, char *err, size_t errlen)
{
    int rc = pthread_create(&s->watcher, NULL, watch_main, s);
    if (rc) {
        snprintf(err, errlen, "cannot start the connection watcher thread: %s", strerror(rc));
        return -rc;
    }
    s->watcher_started = true;
    return 0;
}

void conns_stop(sl_server *s)
{
    if (!s->watcher_started) return;
    pthread_mutex_lock(&s->cmu);
    s->watch_exit = true;
    pthread_cond_broadcast(&s->ccv);
    pthread_mutex_unlock(&s->cmu);
    pthread_join(s->watcher, NULL);
    s->watcher_started = false;
}
