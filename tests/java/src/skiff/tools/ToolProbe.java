package skiff.tools;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.Charset;

import org.apache.kafka.common.utils.internals.Exit;

/**
 * A stand-in tool for the tests of ToolServer (tests/unit/test_tool_server.py): each argument
 * is one step, run in order.
 * out:TEXT / err:TEXT print a line; thread:TEXT prints from a started thread (joined);
 * late:TEXT prints from a non-daemon thread 300 ms after main returned; stdin echoes stdin's
 * lines to stdout as "in:" lines; exit:N is Kafka's Exit.exit, halt:N Exit.halt, sysexit:N
 * System.exit; hook:TEXT adds an Exit shutdown hook that prints; rthook:TEXT a Runtime one;
 * throw:TEXT throws; sleep:MS sleeps; prop:K=V prints K's value then sets it;
 * counter prints and bumps a static counter.
 */
public final class ToolProbe {
    private static int counter;

    public static void main(String[] args) throws Exception {
        for (String a : args) {
            int colon = a.indexOf(':');
            String op = colon < 0 ? a : a.substring(0, colon);
            String v = colon < 0 ? "" : a.substring(colon + 1);
            switch (op) {
                case "out":
                    System.out.println(v);
                    break;
                case "err":
                    System.err.println(v);
                    break;
                case "thread": {
                    Thread t = new Thread(() -> System.out.println(v), "probe-thread");
                    t.start();
                    t.join();
                    break;
                }
                case "late": {
                    Thread t = new Thread(() -> {
                        try {
                            Thread.sleep(300);
                        } catch (InterruptedException e) {
                            return;
                        }
                        System.out.println(v);
                    }, "probe-late");
                    t.start();
                    break;
                }
                case "stdin": {
                    BufferedReader r = new BufferedReader(
                        new InputStreamReader(System.in, Charset.defaultCharset()));
                    for (String line = r.readLine(); line != null; line = r.readLine()) {
                        System.out.println("in:" + line);
                    }
                    break;
                }
                case "exit":
                    Exit.exit(Integer.parseInt(v));
                    System.out.println("after exit");
                    break;
                case "halt":
                    Exit.halt(Integer.parseInt(v));
                    break;
                case "sysexit":
                    System.exit(Integer.parseInt(v));
                    break;
                case "hook":
                    Exit.addShutdownHook("probe-hook", () -> System.out.println(v));
                    break;
                case "rthook":
                    Runtime.getRuntime().addShutdownHook(new Thread(() -> System.out.println(v)));
                    break;
                case "throw":
                    throw new IllegalStateException(v);
                case "sleep":
                    Thread.sleep(Long.parseLong(v));
                    break;
                case "prop":
                    String[] kv = v.split("=", 2);
                    System.out.println(kv[0] + "=" + System.getProperty(kv[0]));
                    System.setProperty(kv[0], kv[1]);
                    break;
                case "counter":
                    System.out.println("counter=" + counter++);
                    break;
                default:
                    throw new IllegalArgumentException("unknown step " + a);
            }
        }
    }
}
