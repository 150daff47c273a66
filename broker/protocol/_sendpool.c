/* Native threads that send Fetch answers, so that one event loop's sends are not its limit.
 *
 * A large Fetch answer is a few bytes of framing and file slices of the log, sent with
 * sendfile. Those sends are most of a fetching broker's CPU (the kernel copies into the
 * socket and, on loopback, delivers to the peer), and on one event loop they run one after
 * another on one thread. Python threads calling os.sendfile did not help: each return takes
 * the GIL again, and the loop and the senders took turns on it (docs/benchmarks.md, "Replayed
 * fetch with a cheaper replayer"). These threads never touch Python: a job is copied out of
 * Python objects under the GIL at submit, the threads send it on the socket with their own
 * duplicates of every descriptor, and the result is read back under the GIL by collect.
 *
 * The socket stays non-blocking (the event loop's), so a thread never waits on a slow peer:
 * a send refused with EAGAIN ends the job, which reports how far it got, and the caller
 * waits for writability on its loop and submits the rest.
 *
 *   Pool(threads)                       start the threads
 *   pool.fileno()                       an eventfd, readable when jobs have ended
 *   pool.submit(token, socket_fd, parts) parts: bytes-likes and (fd, offset, length) tuples
 *   pool.collect()                      [(token, errno or 0, bytes sent), ...] of ended jobs
 *   pool.close()                        stop and join the threads; pending jobs end ECANCELED
 *
 * A file that ends before its slice does ends the job with ENODATA.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAX_THREADS 64
/* How long a thread waits for a full socket to take more before it gives the job back. */
#define WRITABLE_WAIT_MS 20
#define MAX_PARTS 4096

typedef struct {
    int fd;          /* -1 for bytes */
    off_t offset;    /* file offset, or offset into the job's byte block */
    size_t length;
} Part;

typedef struct Job {
    struct Job *next;
    long long token;
    int sock;
    Py_ssize_t nparts;
    Part *parts;
    char *bytes;
    long long sent;
    int error;
} Job;

typedef struct {
    PyObject_HEAD
    pthread_mutex_t lock;
    pthread_cond_t wake;
    Job *pending_head, *pending_tail;
    Job *done_head, *done_tail;
    int event_fd;
    int stopping;
    int nthreads;
    pthread_t threads[MAX_THREADS];
} Pool;

static void free_job(Job *job) {
    for (Py_ssize_t i = 0; i < job->nparts; i++) {
        if (job->parts[i].fd >= 0) close(job->parts[i].fd);
    }
    if (job->sock >= 0) close(job->sock);
    free(job->parts);
    free(job->bytes);
    free(job);
}

/* Until the socket is writable or WRITABLE_WAIT_MS passes: 1 if writable. */
static int wait_writable(int sock) {
    struct pollfd pfd = {.fd = sock, .events = POLLOUT, .revents = 0};
    for (;;) {
        int rc = poll(&pfd, 1, WRITABLE_WAIT_MS);
        if (rc < 0 && errno == EINTR) continue;
        /* Errors and hang-ups count as writable: the next send reports them. */
        return rc > 0;
    }
}

/* Sends the job's parts in order until they are all sent, an error, or the socket stays
 * full for WRITABLE_WAIT_MS (the job then ends with EAGAIN); runs without the GIL. A full
 * socket is waited for here rather than on the event loop: the receiver drains while the
 * sender sends, so room comes back within microseconds, and each job given back to the loop
 * costs it a wake-up, a writability watch and a resubmission. */
static void run_job(Job *job) {
    Py_ssize_t i = 0;
    while (i < job->nparts) {
        Part *p = &job->parts[i];
        if (p->length == 0) {
            i++;
            continue;
        }
        if (p->fd < 0) {
            /* A run of byte parts goes out in one sendmsg. */
            struct iovec iov[64];
            int n = 0;
            Py_ssize_t j = i;
            while (j < job->nparts && job->parts[j].fd < 0 && n < 64) {
                if (job->parts[j].length > 0) {
                    iov[n].iov_base = job->bytes + job->parts[j].offset;
                    iov[n].iov_len = job->parts[j].length;
                    n++;
                }
                j++;
            }
            struct msghdr msg;
            memset(&msg, 0, sizeof msg);
            msg.msg_iov = iov;
            msg.msg_iovlen = (size_t)n;
            ssize_t sent = sendmsg(job->sock, &msg, MSG_NOSIGNAL);
            if (sent < 0) {
                if (errno == EINTR) continue;
                if ((errno == EAGAIN || errno == EWOULDBLOCK) && wait_writable(job->sock))
                    continue;
                job->error = errno;
                return;
            }
            job->sent += sent;
            size_t left = (size_t)sent;
            while (i < j && left >= job->parts[i].length) {
                left -= job->parts[i].length;
                job->parts[i].length = 0;
                i++;
            }
            if (i < j) {
                job->parts[i].offset += (off_t)left;
                job->parts[i].length -= left;
            }
            continue;
        }
        ssize_t sent = sendfile(job->sock, p->fd, &p->offset, p->length);
        if (sent < 0) {
            if (errno == EINTR) continue;
            if ((errno == EAGAIN || errno == EWOULDBLOCK) && wait_writable(job->sock)) continue;
            job->error = errno;
            return;
        }
        if (sent == 0) {
            job->error = ENODATA;
            return;
        }
        job->sent += sent;
        p->length -= (size_t)sent;
    }
}

static void finish(Pool *pool, Job *job) {
    /* Descriptors close here, off the GIL; the job keeps only what collect reports. */
    for (Py_ssize_t i = 0; i < job->nparts; i++) {
        if (job->parts[i].fd >= 0) {
            close(job->parts[i].fd);
            job->parts[i].fd = -1;
        }
    }
    close(job->sock);
    job->sock = -1;
    pthread_mutex_lock(&pool->lock);
    job->next = NULL;
    if (pool->done_tail) pool->done_tail->next = job;
    else pool->done_head = job;
    pool->done_tail = job;
    pthread_mutex_unlock(&pool->lock);
    uint64_t one = 1;
    ssize_t w;
    do {
        w = write(pool->event_fd, &one, sizeof one);
    } while (w < 0 && errno == EINTR);
}

static void *worker(void *arg) {
    Pool *pool = (Pool *)arg;
    for (;;) {
        pthread_mutex_lock(&pool->lock);
        while (!pool->pending_head && !pool->stopping) pthread_cond_wait(&pool->wake, &pool->lock);
        Job *job = pool->pending_head;
        if (!job) {
            pthread_mutex_unlock(&pool->lock);
            return NULL;
        }
        pool->pending_head = job->next;
        if (!pool->pending_head) pool->pending_tail = NULL;
        int cancelled = pool->stopping;
        pthread_mutex_unlock(&pool->lock);
        if (cancelled) job->error = ECANCELED;
        else run_job(job);
        finish(pool, job);
    }
}

static void stop_threads(Pool *pool) {
    if (pool->nthreads == 0) return;
    pthread_mutex_lock(&pool->lock);
    pool->stopping = 1;
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
    int n = pool->nthreads;
    pool->nthreads = 0;
    Py_BEGIN_ALLOW_THREADS
    for (int i = 0; i < n; i++) pthread_join(pool->threads[i], NULL);
    Py_END_ALLOW_THREADS
}

static int Pool_init(Pool *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"threads", NULL};
    int threads;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "i", kwlist, &threads)) return -1;
    if (threads < 1 || threads > MAX_THREADS) {
        PyErr_Format(PyExc_ValueError, "threads must be 1 to %d, not %d", MAX_THREADS, threads);
        return -1;
    }
    if (self->event_fd >= 0 || self->nthreads > 0) {
        PyErr_SetString(PyExc_RuntimeError, "the pool is already started");
        return -1;
    }
    self->event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (self->event_fd < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    for (int i = 0; i < threads; i++) {
        int rc = pthread_create(&self->threads[i], NULL, worker, self);
        if (rc != 0) {
            stop_threads(self);
            errno = rc;
            PyErr_SetFromErrno(PyExc_OSError);
            return -1;
        }
        self->nthreads = i + 1;
    }
    return 0;
}

static PyObject *Pool_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    Pool *self = (Pool *)type->tp_alloc(type, 0);
    if (!self) return NULL;
    pthread_mutex_init(&self->lock, NULL);
    pthread_cond_init(&self->wake, NULL);
    self->event_fd = -1;
    return (PyObject *)self;
}

static void drain_done(Pool *self) {
    Job *job = self->done_head;
    self->done_head = self->done_tail = NULL;
    while (job) {
        Job *next = job->next;
        free_job(job);
        job = next;
    }
}

static void Pool_dealloc(Pool *self) {
    stop_threads(self);
    drain_done(self);
    if (self->event_fd >= 0) close(self->event_fd);
    pthread_mutex_destroy(&self->lock);
    pthread_cond_destroy(&self->wake);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Pool_close(Pool *self, PyObject *unused) {
    stop_threads(self);
    Py_RETURN_NONE;
}

static PyObject *Pool_fileno(Pool *self, PyObject *unused) {
    if (self->event_fd < 0) {
        PyErr_SetString(PyExc_ValueError, "the pool is not started");
        return NULL;
    }
    return PyLong_FromLong(self->event_fd);
}

static int dup_fd(int fd) {
    return fcntl(fd, F_DUPFD_CLOEXEC, 0);
}

static PyObject *Pool_submit(Pool *self, PyObject *args) {
    long long token;
    int sock;
    PyObject *parts_arg;
    if (!PyArg_ParseTuple(args, "LiO", &token, &sock, &parts_arg)) return NULL;
    if (self->nthreads == 0) {
        PyErr_SetString(PyExc_ValueError, "the pool is closed");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(parts_arg, "parts must be a sequence");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > MAX_PARTS) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "at most %d parts, not %zd", MAX_PARTS, n);
        return NULL;
    }
    PyObject **items = PySequence_Fast_ITEMS(seq);
    Job *job = calloc(1, sizeof(Job));
    Part *parts = calloc((size_t)(n > 0 ? n : 1), sizeof(Part));
    if (!job || !parts) {
        free(job);
        free(parts);
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    job->parts = parts;
    job->token = token;
    job->sock = -1;
    for (Py_ssize_t i = 0; i < n; i++) parts[i].fd = -1;
    job->nparts = n;
    /* First the byte parts' total, to copy them into one block. */
    size_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = items[i];
        if (PyTuple_Check(item)) continue;
        Py_buffer view;
        if (PyObject_GetBuffer(item, &view, PyBUF_SIMPLE) < 0) goto fail;
        parts[i].offset = (off_t)total;
        parts[i].length = (size_t)view.len;
        total += (size_t)view.len;
        PyBuffer_Release(&view);
    }
    job->bytes = malloc(total > 0 ? total : 1);
    if (!job->bytes) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = items[i];
        if (!PyTuple_Check(item)) {
            Py_buffer view;
            if (PyObject_GetBuffer(item, &view, PyBUF_SIMPLE) < 0) goto fail;
            if ((size_t)view.len != parts[i].length) {
                PyBuffer_Release(&view);
                PyErr_SetString(PyExc_RuntimeError, "a part changed size during submit");
                goto fail;
            }
            memcpy(job->bytes + parts[i].offset, view.buf, (size_t)view.len);
            PyBuffer_Release(&view);
            continue;
        }
        int fd;
        long long offset, length;
        if (!PyArg_ParseTuple(item, "iLL;a file part is (fd, offset, length)", &fd, &offset,
                              &length))
            goto fail;
        if (fd < 0 || offset < 0 || length < 0) {
            PyErr_Format(PyExc_ValueError, "bad file part (%d, %lld, %lld)", fd, offset, length);
            goto fail;
        }
        parts[i].fd = dup_fd(fd);
        if (parts[i].fd < 0) {
            PyErr_SetFromErrno(PyExc_OSError);
            goto fail;
        }
        parts[i].offset = (off_t)offset;
        parts[i].length = (size_t)length;
    }
    job->sock = dup_fd(sock);
    if (job->sock < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        goto fail;
    }
    Py_DECREF(seq);
    pthread_mutex_lock(&self->lock);
    if (self->pending_tail) self->pending_tail->next = job;
    else self->pending_head = job;
    self->pending_tail = job;
    pthread_cond_signal(&self->wake);
    pthread_mutex_unlock(&self->lock);
    Py_RETURN_NONE;
fail:
    Py_DECREF(seq);
    free_job(job);
    return NULL;
}

static PyObject *Pool_collect(Pool *self, PyObject *unused) {
    uint64_t count;
    /* Read the eventfd before taking the list: a job that ends in between is taken now
     * and leaves the eventfd readable, so the next collect finds nothing, never the reverse. */
    if (self->event_fd >= 0 && read(self->event_fd, &count, sizeof count) < 0 && errno != EAGAIN) {
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    pthread_mutex_lock(&self->lock);
    Job *job = self->done_head;
    self->done_head = self->done_tail = NULL;
    pthread_mutex_unlock(&self->lock);
    PyObject *out = PyList_New(0);
    while (job) {
        Job *next = job->next;
        if (out) {
            PyObject *t = Py_BuildValue("(LiL)", job->token, job->error, job->sent);
            if (!t || PyList_Append(out, t) < 0) Py_CLEAR(out);
            Py_XDECREF(t);
        }
        free_job(job);
        job = next;
    }
    return out;
}

static PyMethodDef Pool_methods[] = {
    {"submit", (PyCFunction)Pool_submit, METH_VARARGS, "submit(token, socket_fd, parts)"},
    {"collect", (PyCFunction)Pool_collect, METH_NOARGS, "ended jobs: [(token, errno, sent)]"},
    {"fileno", (PyCFunction)Pool_fileno, METH_NOARGS, "the eventfd readable when jobs end"},
    {"close", (PyCFunction)Pool_close, METH_NOARGS, "stop and join the threads"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject PoolType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "broker.protocol._sendpool.Pool",
    .tp_basicsize = sizeof(Pool),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "native threads that send answers of bytes and file slices",
    .tp_new = Pool_new,
    .tp_init = (initproc)Pool_init,
    .tp_dealloc = (destructor)Pool_dealloc,
    .tp_methods = Pool_methods,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_sendpool", "native threads that send answers", -1, NULL,
};

PyMODINIT_FUNC PyInit__sendpool(void) {
    if (PyType_Ready(&PoolType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&PoolType);
    if (PyModule_AddObject(m, "Pool", (PyObject *)&PoolType) < 0) {
        Py_DECREF(&PoolType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
