package skiff.tools;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.reflect.Field;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.Channels;
import java.nio.channels.SocketChannel;
import java.nio.charset.Charset;
import java.nio.charset.StandardCharsets;
import java.security.Permission;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ForkJoinPool;
import java.util.concurrent.ForkJoinWorkerThread;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.management.MBeanServer;
import javax.management.ObjectName;

import org.apache.kafka.common.utils.internals.Exit;

/**
 * Runs Kafka's command-line tools (their {@code main}) one at a time inside one long-lived JVM,
 * so a test suite pays the class loading and JIT of the admin client once instead of per call.
 *
 * <p>{@code java -Djava.security.manager=allow --add-opens java.base/java.lang=ALL-UNNAMED
 * -cp ... skiff.tools.ToolServer SOCKET}: connects to the Unix socket SOCKET (the caller
 * listens), then serves requests until the socket closes. Request: int n, then n fields (int
 * length, -1 for none, then UTF-8 bytes): tool class, stdin text (none: stdin at EOF), args.
 * Answer: int exit code, int threads left running by finished calls, int length + stdout bytes,
 * int length + stderr bytes (in the JVM's default charset, as a forked tool writes them).
 *
 * <p>What a forked JVM would do, done per call:
 * <ul>
 * <li>System.out/err/in are installed once, and route by thread: a thread of the call's own
 * thread group (the tool's "main" and every thread it starts) writes into the call's buffers;
 * a thread left over from an earlier call is dropped (the JVM it ran in would be gone).</li>
 * <li>Exit: Kafka's {@code Exit.exit/halt} and {@code System.exit} (a SecurityManager) stop the
 * calling thread as the JVM would (it blocks until the call is answered, then unwinds with a
 * private error so its finally blocks release what they hold); exit runs the call's shutdown
 * hooks (Exit.addShutdownHook and Runtime.addShutdownHook), halt does not. The code is taken
 * modulo 256, as the process status is.</li>
 * <li>main returning: the call ends when its last non-daemon thread ends (as DestroyJavaVM
 * waits), exit 0; main throwing: "Exception in thread "main"" and the trace on stderr, exit 1.
 * </li>
 * <li>Static state a fresh JVM would not have: system properties are restored, MBeans the call
 * registered are unregistered, and the clients' id sequences (adminclient-1, producer-1,
 * consumer-1) start again.</li>
 * </ul>
 * A tool that leaves threads running keeps them running here; the count is reported so the
 * caller can replace the server.
 */
public final class ToolServer {

    /** Unwinds a thread that asked the JVM to exit, once its call is answered. */
    static final class ExitError extends Error {
        private static final long serialVersionUID = 1L;

        ExitError(int code) {
            super("exit " + code, null, false, false);
        }
    }

    static final class Call {
        final Group group;
        final ByteArrayOutputStream out = new ByteArrayOutputStream();
        final ByteArrayOutputStream err = new ByteArrayOutputStream();
        final InputStream in;
        final List<Thread> hooks = new ArrayList<>();
        Thread main;
        Integer exitCode;      // set by the first exit or halt
        boolean runHooks;      // exit (true) or halt (false)
        boolean mainThrew;
        boolean answered;      // output frozen, exit-blocked threads released

        Call(int id, byte[] stdin) {
            this.group = new Group("tool-" + id, this);
            this.in = new ByteArrayInputStream(stdin == null ? new byte[0] : stdin);
        }
    }

    /** The thread group of one call: its uncaught exceptions are printed as the JVM would. */
    static final class Group extends ThreadGroup {
        final Call call;

        Group(String name, Call call) {
            super(name);
            this.call = call;
        }

        @Override
        public void uncaughtException(Thread t, Throwable e) {
            if (e instanceof ExitError) {
                return;
            }
            if (t == call.main) {
                synchronized (call) {
                    call.mainThrew = true;
                }
            }
            super.uncaughtException(t, e);
        }
    }

    private static volatile Call current;
    private static volatile boolean serverExiting;
    private static final PrintStream LOG = System.err;  // the server's own stderr (a log file)

    /** The call a thread works for: its thread group's, or the current call's. */
    static Call callOf(Thread t) {
        ThreadGroup g = t.getThreadGroup();
        if (!(t instanceof ForkJoinWorkerThread)) {
            for (; g != null; g = g.getParent()) {
                if (g instanceof Group) {
                    return ((Group) g).call;
                }
            }
        }
        return current;
    }

    /** System.out or System.err: each write goes to the writing thread's call, if still open. */
    static final class Router extends OutputStream {
        private final boolean isErr;

        Router(boolean isErr) {
            this.isErr = isErr;
        }

        @Override
        public void write(int b) {
            write(new byte[] {(byte) b}, 0, 1);
        }

        @Override
        public void write(byte[] b, int off, int len) {
            Call call = callOf(Thread.currentThread());
            if (call == null) {
                LOG.write(b, off, len);
                return;
            }
            synchronized (call) {
                if (!call.answered) {
                    (isErr ? call.err : call.out).write(b, off, len);
                }
            }
        }

        @Override
        public void flush() {
            LOG.flush();
        }
    }

    /** System.in: the call's stdin text, then EOF; EOF for any other thread. */
    static final class InRouter extends InputStream {
        private static InputStream source() {
            Call call = callOf(Thread.currentThread());
            return call == null || call.answered ? InputStream.nullInputStream() : call.in;
        }

        @Override
        public int read() throws IOException {
            return source().read();
        }

        @Override
        public int read(byte[] b, int off, int len) throws IOException {
            return source().read(b, off, len);
        }

        @Override
        public int available() throws IOException {
            return source().available();
        }
    }

    /**
     * What exit does to the calling thread: the call's exit code is recorded (the first one
     * wins), and the thread waits until the call is answered, then unwinds.
     */
    static ExitError exitRequested(int code, boolean runHooks) {
        Call call = callOf(Thread.currentThread());
        if (call == null) {
            return new ExitError(code);
        }
        synchronized (call) {
            if (call.answered) {
                return new ExitError(code);
            }
            if (call.exitCode == null) {
                call.exitCode = code & 0xff;
                call.runHooks = runHooks;
                call.notifyAll();
            }
            while (!call.answered) {
                try {
                    call.wait();
                } catch (InterruptedException e) {
                    // the JVM would not let this thread go on either
                }
            }
        }
        return new ExitError(code);
    }

    /** System.exit / Runtime.halt from a tool: the same as Kafka's Exit. */
    static final class Guard extends SecurityManager {
        @Override
        public void checkPermission(Permission perm) {
        }

        @Override
        public void checkPermission(Permission perm, Object context) {
        }

        @Override
        public void checkExit(int status) {
            if (!serverExiting) {
                throw exitRequested(status, true);
            }
        }
    }

    // -- static state a fresh JVM would not carry over -------------------------------------

    private static final String[] SEQUENCES = {
        "org.apache.kafka.clients.admin.KafkaAdminClient#ADMIN_CLIENT_ID_SEQUENCE",
        "org.apache.kafka.clients.consumer.ConsumerConfig#CONSUMER_CLIENT_ID_SEQUENCE",
        "org.apache.kafka.clients.producer.ProducerConfig#PRODUCER_CLIENT_ID_SEQUENCE",
        "org.apache.kafka.tools.BrokerApiVersionsCommand$AdminClient#ADMIN_CLIENT_ID_SEQUENCE",
    };
    private static final Map<AtomicInteger, Integer> SEQUENCE_START = new IdentityHashMap<>();

    private static void findSequences() {
        for (String spec : SEQUENCES) {
            String[] parts = spec.split("#");
            try {
                Field f = Class.forName(parts[0]).getDeclaredField(parts[1]);
                f.setAccessible(true);
                AtomicInteger seq = (AtomicInteger) f.get(null);
                SEQUENCE_START.put(seq, seq.get());
            } catch (ReflectiveOperationException | RuntimeException e) {
                LOG.println("tool server: no id sequence " + spec + ": " + e);
            }
        }
    }

    @SuppressWarnings("unchecked")
    private static Set<Thread> runtimeHooks() {
        try {
            Class<?> c = Class.forName("java.lang.ApplicationShutdownHooks");
            Field f = c.getDeclaredField("hooks");
            f.setAccessible(true);
            synchronized (c) {
                Map<Thread, Thread> hooks = (Map<Thread, Thread>) f.get(null);
                return hooks == null ? new HashSet<>() : new HashSet<>(hooks.keySet());
            }
        } catch (ReflectiveOperationException | RuntimeException e) {
            return new HashSet<>();
        }
    }

    private static Set<ObjectName> kafkaMBeans(MBeanServer mbs) {
        Set<ObjectName> names = new HashSet<>();
        for (ObjectName n : mbs.queryNames(null, null)) {
            if (n.getDomain().startsWith("kafka")) {
                names.add(n);
            }
        }
        return names;
    }

    // -- one call ----------------------------------------------------------------------------

    private static boolean nonDaemonAlive(ThreadGroup g) {
        Thread[] threads = new Thread[g.activeCount() + 16];
        int n = g.enumerate(threads, true);
        for (int i = 0; i < n; i++) {
            if (threads[i].isAlive() && !threads[i].isDaemon()) {
                return true;
            }
        }
        return false;
    }

    private static int alive(ThreadGroup g) {
        Thread[] threads = new Thread[g.activeCount() + 16];
        int n = g.enumerate(threads, true);
        int alive = 0;
        for (int i = 0; i < n; i++) {
            if (threads[i].isAlive()) {
                alive++;
            }
        }
        return alive;
    }

    /**
     * The tool's main, called through a method handle so that a stack trace shows nothing
     * below main but this class's run (the handle's frames are hidden).
     */
    static final class ToolThread extends Thread {
        private final MethodHandle main;
        private final String[] args;

        ToolThread(ThreadGroup group, MethodHandle main, String[] args) {
            super(group, "main");
            this.main = main;
            this.args = args;
        }

        @Override
        public void run() {
            try {
                main.invokeExact(args);
            } catch (Throwable t) {
                throw ToolServer.<RuntimeException>sneak(t);
            }
        }
    }

    private static final Pattern OWN_FRAME =
        Pattern.compile("^\\s*at skiff\\.tools\\.ToolServer\\$ToolThread\\.run\\(.*");
    private static final Pattern MORE = Pattern.compile("^(\\s*)\\.\\.\\. (\\d+) more$");
    private static final Pattern TRACE_LINE =
        Pattern.compile("^\\s*(at |\\.\\.\\. \\d+ more$|Caused by: |Suppressed: ).*");

    /**
     * Stack traces as a forked JVM prints them: without the frame of ToolThread.run below the
     * tool's main, and with one frame fewer "in common" for the causes that shared it.
     */
    static byte[] forkedTraces(byte[] text) {
        String s = new String(text, StandardCharsets.ISO_8859_1);  // byte for byte
        if (!s.contains("skiff.tools.ToolServer$ToolThread.run(")) {
            return text;
        }
        StringBuilder out = new StringBuilder(s.length());
        boolean dropped = false;
        int start = 0;
        while (start < s.length()) {
            int nl = s.indexOf('\n', start);
            int end = nl < 0 ? s.length() : nl + 1;
            String line = s.substring(start, end);
            String bare = line.endsWith("\n") ? line.substring(0, line.length() - 1) : line;
            if (bare.endsWith("\r")) {
                bare = bare.substring(0, bare.length() - 1);
            }
            start = end;
            if (OWN_FRAME.matcher(bare).matches()) {
                dropped = true;
                continue;
            }
            Matcher more = MORE.matcher(bare);
            if (dropped && more.matches()) {
                int n = Integer.parseInt(more.group(2)) - 1;
                if (n > 0) {
                    out.append(more.group(1)).append("... ").append(n).append(" more")
                        .append(line.substring(bare.length()));
                }
                continue;
            }
            if (!TRACE_LINE.matcher(bare).matches()) {
                dropped = false;
            }
            out.append(line);
        }
        return out.toString().getBytes(StandardCharsets.ISO_8859_1);
    }

    private static Call run(int id, String toolClass, byte[] stdin, String[] args)
            throws InterruptedException {
        Call call = new Call(id, stdin);
        Set<Thread> hooksBefore = runtimeHooks();
        MethodHandle mh;
        try {
            mh = MethodHandles.publicLookup().findStatic(Class.forName(toolClass), "main",
                MethodType.methodType(void.class, String[].class));
        } catch (ReflectiveOperationException e) {
            // what the java launcher says
            String msg = "Error: Could not find or load main class " + toolClass
                + System.lineSeparator() + "Caused by: " + e + System.lineSeparator();
            byte[] b = msg.getBytes(Charset.defaultCharset());
            call.err.write(b, 0, b.length);
            call.exitCode = 1;
            call.answered = true;
            return call;
        }
        Thread main = new ToolThread(call.group, mh, args);
        call.main = main;
        current = call;
        main.start();
        synchronized (call) {
            // main's end, then its other non-daemon threads' (as DestroyJavaVM waits), or an exit
            while (call.exitCode == null && (main.isAlive() || nonDaemonAlive(call.group))) {
                call.wait(5);
            }
        }
        boolean runHooks;
        synchronized (call) {
            if (call.exitCode == null) {
                call.exitCode = call.mainThrew ? 1 : 0;
                call.runHooks = true;
            }
            runHooks = call.runHooks;
        }
        List<Thread> hooks = new ArrayList<>(call.hooks);
        for (Thread t : runtimeHooks()) {
            if (!hooksBefore.contains(t)) {
                Runtime.getRuntime().removeShutdownHook(t);
                hooks.add(t);
            }
        }
        if (runHooks) {
            for (Thread t : hooks) {
                t.start();
            }
            for (Thread t : hooks) {
                t.join();
            }
        }
        System.out.flush();
        System.err.flush();
        synchronized (call) {
            call.answered = true;
            call.notifyAll();
        }
        return call;
    }

    /** A checked exception from main, thrown unchanged (as the launcher would see it). */
    @SuppressWarnings("unchecked")
    private static <T extends Throwable> RuntimeException sneak(Throwable t) throws T {
        throw (T) t;
    }

    private static byte[] readField(DataInputStream in) throws IOException {
        int len = in.readInt();
        if (len < 0) {
            return null;
        }
        if (len > (64 << 20)) {
            throw new IOException("field of " + len + " bytes");
        }
        byte[] b = new byte[len];
        in.readFully(b);
        return b;
    }

    private static void exitServer(int code) {
        serverExiting = true;
        Runtime.getRuntime().halt(code);
    }

    public static void main(String[] argv) throws Exception {
        if (argv.length != 1) {
            LOG.println("usage: ToolServer SOCKET_PATH");
            exitServer(2);
        }
        Charset charset = Charset.defaultCharset();
        String enc = System.getProperty("sun.stdout.encoding");
        if (enc != null) {
            charset = Charset.forName(enc);
        }
        System.setOut(new PrintStream(new Router(false), true, charset));
        System.setErr(new PrintStream(new Router(true), true, charset));
        System.setIn(new InRouter());
        ForkJoinPool.commonPool();  // its threads are made as without a SecurityManager
        Exit.setExitProcedure((code, message) -> {
            throw exitRequested(code, true);
        });
        Exit.setHaltProcedure((code, message) -> {
            throw exitRequested(code, false);
        });
        Exit.setShutdownHookAdder((name, runnable) -> {
            Call call = callOf(Thread.currentThread());
            if (call != null) {
                synchronized (call) {
                    call.hooks.add(name == null ? new Thread(runnable) : new Thread(runnable, name));
                }
            }
        });
        findSequences();
        System.setSecurityManager(new Guard());
        MBeanServer mbs = ManagementFactory.getPlatformMBeanServer();

        // the caller (pytest) gone: end, even in the middle of a call that hangs
        ProcessHandle parent = ProcessHandle.current().parent().orElse(null);
        Thread watchdog = new Thread(() -> {
            while (parent != null && parent.isAlive()) {
                try {
                    Thread.sleep(1000);
                } catch (InterruptedException e) {
                    return;
                }
            }
            exitServer(3);
        }, "tool-server-watchdog");
        watchdog.setDaemon(true);
        watchdog.start();

        SocketChannel channel = SocketChannel.open(StandardProtocolFamily.UNIX);
        channel.connect(UnixDomainSocketAddress.of(argv[0]));
        DataInputStream in = new DataInputStream(Channels.newInputStream(channel));
        DataOutputStream out = new DataOutputStream(
            new java.io.BufferedOutputStream(Channels.newOutputStream(channel), 1 << 16));
        List<Call> leftovers = new ArrayList<>();
        for (int id = 1; ; id++) {
            int n;
            try {
                n = in.readInt();
            } catch (EOFException e) {
                exitServer(0);
                return;
            }
            if (n < 2 || n > 10_000) {
                LOG.println("tool server: bad request of " + n + " fields");
                exitServer(2);
            }
            String toolClass = new String(readField(in), StandardCharsets.UTF_8);
            byte[] stdin = readField(in);
            String[] args = new String[n - 2];
            for (int i = 0; i < args.length; i++) {
                args[i] = new String(readField(in), StandardCharsets.UTF_8);
            }
            Properties props = (Properties) System.getProperties().clone();
            Set<ObjectName> mbeansBefore = kafkaMBeans(mbs);
            for (Map.Entry<AtomicInteger, Integer> e : SEQUENCE_START.entrySet()) {
                e.getKey().set(e.getValue());
            }

            Call call = run(id, toolClass, stdin, args);

            // let threads released from exit unwind (closing what they opened) before the
            // next call starts
            if (call.main != null) {
                call.main.join(2000);
            }
            leftovers.add(call);
            int left = 0;
            for (java.util.Iterator<Call> it = leftovers.iterator(); it.hasNext(); ) {
                int a = alive(it.next().group);
                if (a == 0) {
                    it.remove();
                }
                left += a;
            }
            current = null;
            for (ObjectName name : kafkaMBeans(mbs)) {
                if (!mbeansBefore.contains(name)) {
                    try {
                        mbs.unregisterMBean(name);
                    } catch (Exception e) {
                        // already gone
                    }
                }
            }
            System.setProperties(props);

            out.writeInt(call.exitCode);
            out.writeInt(left);
            byte[] o;
            byte[] e;
            synchronized (call) {
                o = forkedTraces(call.out.toByteArray());
                e = forkedTraces(call.err.toByteArray());
            }
            out.writeInt(o.length);
            out.write(o);
            out.writeInt(e.length);
            out.write(e);
            out.flush();
        }
    }
}
