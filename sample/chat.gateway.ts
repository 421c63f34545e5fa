import { MessageBody, SubscribeMessage, WebSocketGateway } from '@nestjs/websockets';
import { RateLimit } from '../lib';

/**
 * socket.io on the app's port: `socket.emit('chat', 'hi', (echo) => …)`. Each connection's quota follows its
 * handshake address: 3 messages at once, then one per 2 seconds. A message past that gets no answer; the
 * client receives an `exception` event `{ status: 'error', statusCode: 429, message, retryAfter }` instead,
 * and stays connected.
 */
@WebSocketGateway()
export class ChatGateway {
  @SubscribeMessage('chat')
  @RateLimit('token-bucket', 3, '6s', { name: 'chat' })
  chat(@MessageBody() text: string) {
    return `echo: ${text}`;
  }
}
