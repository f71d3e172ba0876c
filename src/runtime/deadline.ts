/** A signal that aborts when its parent does or once its time is up; `clear()` releases its timer and listener. */
export interface Deadline {
  signal: AbortSignal;
  clear(): void;
}

/**
 * Not `AbortSignal.any([parent, AbortSignal.timeout(ms)])`: Node 20 lets the collector take the timeout signal inside
 * such a composite (nodejs/node#57736), and the composite then never aborts. Here the timer holds the controller, so
 * the deadline fires for as long as it is not cleared.
 */
export function deadline(parent: AbortSignal, ms: number): Deadline {
  const controller = new AbortController();
  const onParent = (): void => controller.abort(parent.reason);
  const timer = setTimeout(() => controller.abort(new DOMException(`deadline of ${ms} ms passed`, 'TimeoutError')), ms);
  timer.unref();
  const clear = (): void => {
    clearTimeout(timer);
    parent.removeEventListener('abort', onParent);
  };
  controller.signal.addEventListener('abort', clear, { once: true });
  if (parent.aborted) onParent();
  else parent.addEventListener('abort', onParent, { once: true });
  return { signal: controller.signal, clear };
}
