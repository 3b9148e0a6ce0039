export { createClient } from "./client.js";
export type {
  BatchTaskInput,
  ClientOptions,
  CreateOptions,
  HookwheelClient,
  ListOptions,
  PublishInput,
  ReplayDeadInput,
  RescheduleInput,
  RetryOptions,
  ScheduleListOptions,
  TaskInput,
} from "./client.js";
export { HookwheelError, parseRetryAfter } from "./errors.js";
export { signUp, signupMode } from "./signup.js";
export type { SignupOptions } from "./signup.js";
export {
  callbackResponseBody,
  verifyCallback,
  verifyWebhook,
  verifyWebhookSignature,
  WebhookVerificationError,
} from "./webhook.js";
export type { VerifiedWebhook, VerifyOptions, WebhookBody, WebhookFailure, WebhookHeaders } from "./webhook.js";
export type * from "./types.js";
export type { components, operations, paths } from "./schema.js";
